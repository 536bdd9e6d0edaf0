//! A line chart drawn as SVG on the server: no script, no style attribute (the CSP
//! allows neither), colours from the stylesheet by class. The same numbers follow in a
//! table, for screen readers and for reading exact values.

use maud::{html, Markup};

pub struct Series<'a> {
    pub label: &'a str,
    /// A class of the stylesheet that colours this line.
    pub class: &'a str,
    pub values: Vec<u64>,
}

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 200.0;
const PAD: f64 = 28.0;

pub fn line_chart(title: &str, days: &[String], series: &[Series]) -> Markup {
    let max = series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .max()
        .unwrap_or(0)
        .max(1);
    let n = days.len().max(2) - 1;
    let x = |i: usize| PAD + (WIDTH - 2.0 * PAD) * i as f64 / n as f64;
    let y = |v: u64| HEIGHT - PAD - (HEIGHT - 2.0 * PAD) * v as f64 / max as f64;
    let points = |s: &Series| {
        s.values
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let view_box = format!("0 0 {WIDTH} {HEIGHT}");
    html! {
        figure.chart {
            svg viewBox=(view_box) role="img" aria-labelledby="chart-title" {
                title #chart-title { (title) }
                line.axis x1=(PAD) y1=(HEIGHT - PAD) x2=(WIDTH - PAD) y2=(HEIGHT - PAD) {}
                line.axis x1=(PAD) y1=(PAD) x2=(PAD) y2=(HEIGHT - PAD) {}
                text.tick x=(PAD - 4.0) y=(PAD + 4.0) text-anchor="end" { (max) }
                text.tick x=(PAD - 4.0) y=(HEIGHT - PAD) text-anchor="end" { "0" }
                @if let (Some(first), Some(last)) = (days.first(), days.last()) {
                    text.tick x=(PAD) y=(HEIGHT - 8.0) { (first) }
                    text.tick x=(WIDTH - PAD) y=(HEIGHT - 8.0) text-anchor="end" { (last) }
                }
                @for s in series {
                    polyline class={ "series " (s.class) } fill="none" points=(points(s)) {}
                }
            }
            figcaption {
                ul.legend {
                    @for s in series {
                        li { span class={ "swatch " (s.class) } aria-hidden="true" {} (s.label) }
                    }
                }
            }
        }
        details {
            summary { "The numbers" }
            table {
                caption { (title) }
                thead {
                    tr {
                        th scope="col" { "Day" }
                        @for s in series { th scope="col" { (s.label) } }
                    }
                }
                tbody {
                    @for (i, day) in days.iter().enumerate() {
                        tr {
                            th scope="row" { (day) }
                            @for s in series { td { (s.values.get(i).copied().unwrap_or(0)) } }
                        }
                    }
                }
            }
        }
    }
}
