//! A store that dies part way, for the crash tests; or that counts requests.

#![allow(dead_code)]

use std::sync::Arc;

use object_store::ObjectStore;

/// `inner` as an instance that dies after `budget` requests sees it: every later request
/// fails, and none of them reaches the store. What a SIGKILL leaves, at each point of an
/// operation.
#[derive(Debug)]
pub(crate) struct Dying {
    inner: Arc<dyn ObjectStore>,
    left: std::sync::atomic::AtomicI64,
}

impl Dying {
    pub(crate) fn after(inner: Arc<dyn ObjectStore>, budget: i64) -> Arc<dyn ObjectStore> {
        let left = std::sync::atomic::AtomicI64::new(budget);
        Arc::new(Self { inner, left })
    }

    /// `inner` with its requests counted (none refused): see [`Dying::requests`].
    pub(crate) fn counting(inner: Arc<dyn ObjectStore>) -> Arc<Self> {
        let left = std::sync::atomic::AtomicI64::new(i64::MAX);
        Arc::new(Self { inner, left })
    }

    /// How many requests a counting store was sent.
    pub(crate) fn requests(&self) -> i64 {
        i64::MAX - self.left.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// One more request, if the instance is still alive.
    fn request(&self) -> object_store::Result<()> {
        if self.left.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) > 0 {
            return Ok(());
        }
        Err(object_store::Error::Generic {
            store: "dying",
            source: "the instance died".into(),
        })
    }

    /// A stream's first request.
    fn stream<T: Send + 'static>(
        &self,
        stream: impl FnOnce() -> futures_util::stream::BoxStream<'static, object_store::Result<T>>,
    ) -> futures_util::stream::BoxStream<'static, object_store::Result<T>> {
        use futures_util::StreamExt;
        match self.request() {
            Ok(()) => stream(),
            Err(error) => futures_util::stream::once(async { Err(error) }).boxed(),
        }
    }
}

impl std::fmt::Display for Dying {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Dying({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for Dying {
    async fn put_opts(
        &self,
        location: &object_store::path::Path,
        payload: object_store::PutPayload,
        opts: object_store::PutOptions,
    ) -> object_store::Result<object_store::PutResult> {
        self.request()?;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &object_store::path::Path,
        opts: object_store::PutMultipartOptions,
    ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
        self.request()?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &object_store::path::Path,
        options: object_store::GetOptions,
    ) -> object_store::Result<object_store::GetResult> {
        self.request()?;
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: futures_util::stream::BoxStream<
            'static,
            object_store::Result<object_store::path::Path>,
        >,
    ) -> futures_util::stream::BoxStream<'static, object_store::Result<object_store::path::Path>>
    {
        self.stream(|| self.inner.delete_stream(locations))
    }

    fn list(
        &self,
        prefix: Option<&object_store::path::Path>,
    ) -> futures_util::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>>
    {
        self.stream(|| self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&object_store::path::Path>,
        offset: &object_store::path::Path,
    ) -> futures_util::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>>
    {
        self.stream(|| self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&object_store::path::Path>,
    ) -> object_store::Result<object_store::ListResult> {
        self.request()?;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &object_store::path::Path,
        to: &object_store::path::Path,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.request()?;
        self.inner.copy_opts(from, to, options).await
    }
}
