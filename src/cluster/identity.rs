//! Who this node is in the cluster: its id, the URL the other nodes reach it at, the
//! shared secret and the lease length, resolved from `cluster.*` once the port is bound.

use std::net::SocketAddr;
use std::time::Duration;

use crate::config::Settings;

#[derive(Debug, Clone)]
pub struct Identity {
    pub node_id: String,
    /// Without a trailing slash.
    pub advertise_url: String,
    /// None: this node neither forwards nor accepts forwarded requests.
    pub secret: Option<String>,
    pub lease: Duration,
    /// How long a forwarded request waits for the owner's answer to begin.
    pub forward_timeout: Duration,
}

impl Identity {
    /// `bound` is the address actually listened on (port 0 picks one).
    pub fn resolve(settings: &Settings, bound: SocketAddr) -> Result<Identity, String> {
        let c = &settings.cluster;
        if c.lease_seconds < 2 {
            return Err(format!(
                "cluster.lease_seconds is {}; it must be 2 or more (the owner renews every third of it)",
                c.lease_seconds
            ));
        }
        let node_id = match c.node_id.trim() {
            "" => format!("{}:{}", host_name(), bound.port()),
            id => id.to_owned(),
        };
        if node_id.len() > 200 || node_id.chars().any(|ch| ch.is_control()) {
            return Err("cluster.node_id must be at most 200 printable characters".into());
        }
        let advertise_url = match c.advertise_url.trim() {
            "" => {
                if bound.ip().is_unspecified() {
                    return Err(format!(
                        "server.host is {} (every interface), so the other nodes cannot \
                         be told where to reach this one: set cluster.advertise_url \
                         (e.g. http://10.0.0.5:{})",
                        bound.ip(),
                        bound.port()
                    ));
                }
                format!("http://{bound}")
            }
            url => url.trim_end_matches('/').to_owned(),
        };
        if !advertise_url.starts_with("http://") {
            return Err(format!(
                "cluster.advertise_url {advertise_url:?} must start with http:// (nodes talk \
                 plain HTTP on a trusted network)"
            ));
        }
        let secret = Some(c.secret.trim())
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        Ok(Identity {
            node_id,
            advertise_url,
            secret,
            lease: Duration::from_secs(c.lease_seconds),
            forward_timeout: Duration::from_secs(c.forward_timeout_seconds.max(1)),
        })
    }

    /// A server that is no node of a cluster (sled): a name, and nothing to reach.
    pub fn alone(settings: &Settings, bound: SocketAddr) -> Identity {
        Identity {
            node_id: match settings.cluster.node_id.trim() {
                "" => format!("{}:{}", host_name(), bound.port()),
                id => id.to_owned(),
            },
            advertise_url: String::new(),
            secret: None,
            lease: Duration::from_secs(settings.cluster.lease_seconds.max(2)),
            forward_timeout: Duration::from_secs(settings.cluster.forward_timeout_seconds.max(1)),
        }
    }

    /// How often the lease loop runs: a third of the lease, so that two ticks can fail
    /// before a held lease expires.
    pub fn tick(&self) -> Duration {
        self.lease / 3
    }
}

fn host_name() -> String {
    hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(toml: &str) -> Settings {
        use config::{Config, File, FileFormat};
        Config::builder()
            .add_source(File::from_str(
                crate::config::DEFAULT_TOML,
                FileFormat::Toml,
            ))
            .add_source(File::from_str(toml, FileFormat::Toml))
            .build()
            .unwrap()
            .try_deserialize()
            .unwrap()
    }

    #[test]
    fn an_unset_node_id_and_url_follow_the_host_name_and_the_bound_port() {
        let id = Identity::resolve(&settings(""), "127.0.0.1:4321".parse().unwrap()).unwrap();
        assert!(id.node_id.ends_with(":4321"), "{}", id.node_id);
        assert_eq!(id.advertise_url, "http://127.0.0.1:4321");
        assert_eq!(id.secret, None);
        assert_eq!(
            id.tick(),
            Duration::from_millis(3333) + Duration::from_nanos(333_333)
        );
    }

    #[test]
    fn a_wildcard_host_without_an_advertise_url_is_refused_naming_the_key() {
        let err = Identity::resolve(&settings(""), "0.0.0.0:8080".parse().unwrap()).unwrap_err();
        assert!(err.contains("cluster.advertise_url"), "{err}");
        let set =
            settings("[cluster]\nadvertise_url = \"http://10.0.0.5:8080/\"\nnode_id = \"n1\"");
        let id = Identity::resolve(&set, "0.0.0.0:8080".parse().unwrap()).unwrap();
        assert_eq!(
            (id.node_id.as_str(), id.advertise_url.as_str()),
            ("n1", "http://10.0.0.5:8080")
        );
    }

    #[test]
    fn a_lease_too_short_to_renew_is_refused() {
        let err = Identity::resolve(
            &settings("[cluster]\nlease_seconds = 1"),
            "127.0.0.1:1".parse().unwrap(),
        )
        .unwrap_err();
        assert!(err.contains("cluster.lease_seconds"), "{err}");
    }
}
