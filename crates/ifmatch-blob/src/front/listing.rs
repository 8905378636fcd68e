//! List Blobs and List Containers: a page at a time, in name order.

use std::time::SystemTime;

use http::header::HeaderMap;

use super::Answered;
use super::Front;
use super::answers::xml_answer;
use crate::operation::ListOptions;
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
        let mut names: Vec<String> = (self.records.containers().await?)
            .into_iter()
            .filter_map(|stored| self.accounts.name_in(account, &stored))
            // The account's own records among its containers' (`$service`).
            .filter(|name| !name.starts_with('$'))
            .filter(|name| name.starts_with(&options.prefix))
            .filter(|name| options.marker.as_ref().is_none_or(|m| name > m))
            .collect();
        names.sort();
        let next_marker =
            (names.len() > options.max_results).then(|| names[options.max_results - 1].clone());
        names.truncate(options.max_results);
        let mut page = Vec::with_capacity(names.len());
        for name in names {
            let key = Key::Container(self.accounts.stored(account, &name));
            // Deleted meanwhile: not listed.
            if let Some(record) = self.records.get(&key).await? {
                page.push((name, record.as_ref().clone()));
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
