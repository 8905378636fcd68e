//! List Blobs and List Containers: a page at a time, in name order.

use std::time::SystemTime;

use http::header::HeaderMap;

use super::answers::xml_answer;
use super::failure::Answered;
use super::state::Front;
use crate::operation::ListOptions;
use crate::soft_delete::parse_deleted_container;
use crate::store::{Key, Objects, Records};
use ifmatch_azure::Env;

impl<R: Records, O: Objects, E: Env> Front<R, O, E> {
    pub(super) async fn list(
        &self,
        container: &str,
        options: &ListOptions,
        now: SystemTime,
    ) -> Answered<O> {
        self.container_record(container).await?;
        let (entries, next_marker) =
            crate::enumeration::page(&self.records, container, options).await?;
        let xml = crate::enumeration::enumeration_results(
            container,
            options,
            &entries,
            next_marker.as_deref(),
            now,
        );
        Ok(xml_answer(HeaderMap::new(), xml))
    }

    /// List Containers: the account's containers, by name, a page at a time.
    pub(super) async fn list_containers(
        &self,
        account: &ifmatch_azure::Account,
        endpoint: &str,
        options: &ListOptions,
        now: SystemTime,
    ) -> Answered<O> {
        // Each container the account lists by its name (and a deleted one's version), with
        // the name it is stored under.
        let mut names: Vec<(String, Option<String>, String)> = (self.records.containers().await?)
            .into_iter()
            .filter_map(|stored| {
                let name = self.accounts.name_in(account, &stored)?;
                let (visible, version) = match parse_deleted_container(&name) {
                    Some((visible, version)) if options.deleted => {
                        (visible.to_owned(), Some(version.to_owned()))
                    }
                    Some(_) => return None,
                    // The account's own records among its containers' (`$service`).
                    None if name.starts_with('$') => return None,
                    None => (name, None),
                };
                Some((visible, version, stored))
            })
            .filter(|(name, ..)| name.starts_with(&options.prefix))
            .filter(|(name, ..)| options.marker.as_ref().is_none_or(|m| name > m))
            .collect();
        names.sort();
        let next_marker =
            (names.len() > options.max_results).then(|| names[options.max_results - 1].0.clone());
        names.truncate(options.max_results);
        let mut page = Vec::with_capacity(names.len());
        for (name, version, stored) in names {
            // Deleted meanwhile, or a deleted one still moving: not listed.
            let Some(record) = self.records.get(&Key::Container(stored)).await? else {
                continue;
            };
            let deleted = record.deleted.map(|d| !d.moving);
            if deleted == version.as_ref().map(|_| true) {
                page.push((name, version, record.as_ref().clone()));
            }
        }
        let xml = crate::enumeration::containers_results(
            endpoint,
            options,
            &page,
            next_marker.as_deref(),
            now,
        );
        Ok(xml_answer(HeaderMap::new(), xml))
    }
}
