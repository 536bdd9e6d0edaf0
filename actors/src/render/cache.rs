//! Compiled stored templates, keyed by id and invalidated by a newer `updated_at`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{compile, Compiled};
use crate::error::Result;
use crate::model::{Template, TemplateId};

#[derive(Default)]
pub struct TemplateCache {
    map: Mutex<HashMap<TemplateId, (i64, Arc<Compiled>)>>,
}

impl TemplateCache {
    pub fn get(&self, t: &Template) -> Result<Arc<Compiled>> {
        let stamp = t.updated_at.millis();
        if let Some((at, c)) = self
            .map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&t.id)
        {
            if *at == stamp {
                return Ok(c.clone());
            }
        }
        let compiled = Arc::new(compile(&t.subject, &t.body)?);
        self.map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(t.id, (stamp, compiled.clone()));
        Ok(compiled)
    }

    pub fn invalidate(&self, id: TemplateId) {
        self.map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }
}
