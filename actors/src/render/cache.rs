//! Compiled stored templates, keyed by id and invalidated by a newer `updated_at`; and
//! compiled inline content of /v1/send, keyed by its text, since apps tend to send the
//! same inline subject and body again and again (parsing them is the costliest step of a
//! send after DKIM signing).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{Compiled, Limits};
use crate::error::Result;
use crate::model::{Template, TemplateId};

/// Inline entries kept at most; past this the inline cache starts over.
const MAX_INLINE: usize = 1024;

/// Inline subject, body and text part.
type InlineKey = (String, String, Option<String>);

pub struct TemplateCache {
    limits: Limits,
    map: Mutex<HashMap<TemplateId, (i64, Arc<Compiled>)>>,
    inline: Mutex<HashMap<InlineKey, Arc<Compiled>>>,
}

impl TemplateCache {
    /// A cache whose templates are compiled (and so rendered) under `limits`.
    pub fn new(limits: Limits) -> Self {
        TemplateCache {
            limits,
            map: Mutex::default(),
            inline: Mutex::default(),
        }
    }

    pub fn get(&self, t: &Template) -> Result<Arc<Compiled>> {
        if let Some(c) = self.cached(t) {
            return Ok(c);
        }
        let compiled = Arc::new(self.limits.compile_with_text(
            &t.subject,
            &t.body,
            t.text.as_deref(),
        )?);
        self.map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(t.id, (t.updated_at.millis(), compiled.clone()));
        Ok(compiled)
    }

    /// Compiles (or finds compiled) an inline subject, body and text part.
    pub fn inline(&self, subject: &str, body: &str, text: Option<&str>) -> Result<Arc<Compiled>> {
        if let Some(c) = self.cached_inline(subject, body, text) {
            return Ok(c);
        }
        let key = inline_key(subject, body, text);
        let compiled = Arc::new(self.limits.compile_with_text(subject, body, text)?);
        let mut inline = self.inline.lock().unwrap_or_else(|p| p.into_inner());
        if inline.len() >= MAX_INLINE {
            inline.clear();
        }
        inline.insert(key, compiled.clone());
        Ok(compiled)
    }

    /// The compiled template when it is cached and current (no compiling).
    pub fn cached(&self, t: &Template) -> Option<Arc<Compiled>> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&t.id)
            .filter(|(at, _)| *at == t.updated_at.millis())
            .map(|(_, c)| c.clone())
    }

    /// The compiled inline content when it is cached (no compiling).
    pub fn cached_inline(
        &self,
        subject: &str,
        body: &str,
        text: Option<&str>,
    ) -> Option<Arc<Compiled>> {
        let inline = self.inline.lock().unwrap_or_else(|p| p.into_inner());
        inline.get(&inline_key(subject, body, text)).cloned()
    }

    pub fn invalidate(&self, id: TemplateId) {
        self.map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }
}

fn inline_key(subject: &str, body: &str, text: Option<&str>) -> InlineKey {
    (subject.to_owned(), body.to_owned(), text.map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_inline_content_is_compiled_once() {
        let cache = TemplateCache::new(Limits::default());
        let a = cache.inline("Hi {{name}}", "<p>x</p>", None).unwrap();
        let b = cache.inline("Hi {{name}}", "<p>x</p>", None).unwrap();
        let c = cache.inline("Hi {{name}}", "<p>y</p>", None).unwrap();
        let d = cache.inline("Hi {{name}}", "<p>x</p>", Some("x")).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert!(!Arc::ptr_eq(&a, &d), "a text part is part of the content");
        assert!(
            cache.inline("{{ broken", "b", None).is_err(),
            "errors are not cached as content"
        );
    }
}
