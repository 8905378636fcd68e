//! The error codes of the blob dialect, with their status codes and messages.
//!
//! A blob-dialect error answers with its status, an `x-ms-error-code` header and an XML body
//! ([`ErrorCode::xml_body`]); the native server and the Worker build the response from this one
//! table so they cannot drift.

/// Declares a dialect's error codes, each with the status it is answered with and its standard
/// message (`Code = STATUS, "message";`, inside `pub enum Name { ... }`). The enum gets `as_str`, `status`, `message`, `ALL` and `Display`. One table per dialect, so
/// that no answer pairs a code with another status. (Used by the Table dialect too.)
#[macro_export]
macro_rules! error_codes {
    ($(#[$meta:meta])* pub enum $enum:ident {
        $($(#[$doc:meta])* $name:ident = $status:ident, $message:literal;)*
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[non_exhaustive]
        pub enum $enum {
            $($(#[$doc])* $name,)*
        }

        impl $enum {
            /// The code as it appears in `x-ms-error-code` and the error body.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$name => stringify!($name),)* }
            }

            /// The HTTP status this code is answered with.
            pub fn status(self) -> ::http::StatusCode {
                match self { $(Self::$name => ::http::StatusCode::$status,)* }
            }

            /// A human-readable description.
            pub fn message(self) -> &'static str {
                match self { $(Self::$name => $message,)* }
            }

            /// Every code, for tests and documentation.
            pub const ALL: &'static [$enum] = &[$(Self::$name,)*];
        }

        impl ::std::fmt::Display for $enum {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

error_codes! {
    /// An error code of the Azure Blob Storage REST dialect.
    pub enum ErrorCode {
    /// A condition in If-Match, If-None-Match, If-Modified-Since or If-Unmodified-Since was not met.
    ConditionNotMet = PRECONDITION_FAILED, "The condition specified using HTTP conditional header(s) is not met.";
    /// A write combined conditions that the dialect does not allow together, or listed several tags.
    MultipleConditionHeadersNotSupported = BAD_REQUEST, "Multiple condition headers are not supported.";
    /// A header the operation does not support was sent.
    UnsupportedHeader = BAD_REQUEST, "One of the HTTP headers specified in the request is not supported.";
    /// A required header is missing.
    MissingRequiredHeader = BAD_REQUEST, "An HTTP header that's mandatory for this request is not specified.";
    /// The storage needs the body's length before it streams (R2), and none was sent.
    MissingContentLengthHeader = LENGTH_REQUIRED, "The Content-Length header was not specified.";
    /// A header value is malformed or out of range.
    InvalidHeaderValue = BAD_REQUEST, "The value for one of the HTTP headers is not in the correct format.";
    /// A query parameter is malformed or names no known operation.
    InvalidQueryParameterValue = BAD_REQUEST, "An invalid value was specified for one of the query parameters in the request URI.";
    /// The container or blob name is invalid (empty, `..`, escaping the data directory).
    InvalidResourceName = BAD_REQUEST, "The specified resource name contains invalid characters.";
    /// Put Block List names a block that is not there, or a block id of another length than the
    /// blob's other blocks.
    InvalidBlockList = BAD_REQUEST, "The specified block list is invalid.";
    /// A block id of another length than the blob's other blocks'.
    InvalidBlobOrBlock = BAD_REQUEST, "The specified blob or block content is invalid.";
    /// A block id that is not base64 of at most 64 bytes, or not as long as the blob's other ids.
    InvalidBlockId = BAD_REQUEST, "The specified block ID is invalid. The block ID must be Base64-encoded.";
    /// A blob would have more blocks than the dialect allows (50,000 committed, 100,000
    /// uncommitted).
    BlockCountExceedsLimit = CONFLICT, "The committed block count cannot exceed the maximum limit of 50,000 blocks.";
    /// The request URI is malformed.
    InvalidUri = BAD_REQUEST, "The requested URI does not represent any resource on the server.";
    /// The requested range cannot be satisfied.
    InvalidRange = RANGE_NOT_SATISFIABLE, "The range specified is invalid for the current size of the resource.";
    /// The method is not supported on this resource.
    UnsupportedHttpVerb = METHOD_NOT_ALLOWED, "The resource doesn't support the specified HTTP verb.";
    /// The request body ended before it was complete (the client went away).
    IncompleteBody = BAD_REQUEST, "The request body is incomplete.";
    /// The body is larger than the configured maximum.
    RequestBodyTooLarge = PAYLOAD_TOO_LARGE, "The request body is too large and exceeds the maximum permissible limit.";
    /// Put Blob with `If-None-Match: *` found the blob already there.
    BlobAlreadyExists = CONFLICT, "The specified blob already exists.";
    /// The blob does not exist.
    BlobNotFound = NOT_FOUND, "The specified blob does not exist.";
    /// The container already exists.
    ContainerAlreadyExists = CONFLICT, "The specified container already exists.";
    /// The container does not exist.
    ContainerNotFound = NOT_FOUND, "The specified container does not exist.";
    /// Acquire on a resource leased under another id.
    LeaseAlreadyPresent = CONFLICT, "There is already a lease present.";
    /// Acquire proposing the current id while the lease is breaking.
    LeaseIsBreakingAndCannotBeAcquired = CONFLICT, "There is already a breaking lease present.";
    /// Change while the lease is breaking.
    LeaseIsBreakingAndCannotBeChanged = CONFLICT, "The lease ID matched, but the lease is currently in breaking state and cannot be changed.";
    /// Renew of a breaking or broken lease.
    LeaseIsBrokenAndCannotBeRenewed = CONFLICT, "The lease ID matched, but the lease has been broken explicitly and cannot be renewed.";
    /// A lease operation named an id other than the current one.
    LeaseIdMismatchWithLeaseOperation = CONFLICT, "The lease ID specified did not match the lease ID for the resource.";
    /// A lease operation that needs a lease found none.
    LeaseNotPresentWithLeaseOperation = CONFLICT, "There is currently no lease on the resource.";
    /// A write to a leased resource came without a lease id.
    LeaseIdMissing = PRECONDITION_FAILED, "There is currently a lease on the resource and no lease ID was specified in the request.";
    /// A blob operation named an id other than the active lease's.
    LeaseIdMismatchWithBlobOperation = PRECONDITION_FAILED, "The lease ID specified did not match the lease ID for the blob.";
    /// A blob operation named a lease id but the blob has no active lease.
    LeaseNotPresentWithBlobOperation = PRECONDITION_FAILED, "There is currently no lease on the blob.";
    /// A container operation named an id other than the active lease's.
    LeaseIdMismatchWithContainerOperation = PRECONDITION_FAILED, "The lease ID specified did not match the lease ID for the container.";
    /// A container operation named a lease id but the container has no active lease.
    LeaseNotPresentWithContainerOperation = PRECONDITION_FAILED, "There is currently no lease on the container.";
    /// A bearer token that is malformed, forged, expired or not for this service: the
    /// `WWW-Authenticate` challenge says where to get one.
    InvalidAuthenticationInfo = UNAUTHORIZED, "Server failed to authenticate the request. Please refer to the information in the www-authenticate header.";
    /// A credential is missing, malformed or wrong (a signature that does not match, a date
    /// out of range, a shared access signature out of its time window).
    AuthenticationFailed = FORBIDDEN, "Server failed to authenticate the request. Make sure the value of the Authorization header is formed correctly including the signature.";
    /// A shared access signature lacks the permission the operation needs.
    AuthorizationPermissionMismatch = FORBIDDEN, "This request is not authorized to perform this operation using this permission.";
    /// A shared access signature does not cover the resource (type) addressed.
    AuthorizationResourceTypeMismatch = FORBIDDEN, "This request is not authorized to perform this operation using this resource type.";
    /// An account shared access signature does not cover the blob service.
    AuthorizationServiceMismatch = FORBIDDEN, "This request is not authorized to perform this operation using this service.";
    /// A shared access signature allows HTTPS only.
    AuthorizationProtocolMismatch = FORBIDDEN, "This request is not authorized to perform this operation using this protocol.";
    /// A shared access signature allows other client addresses only.
    AuthorizationSourceIPMismatch = FORBIDDEN, "This request is not authorized to perform this operation using this source IP.";
    /// A metadata name is not a valid C# identifier, or a value is not ASCII.
    InvalidMetadata = BAD_REQUEST, "The metadata specified is invalid. It has characters that are not permitted.";
    /// The metadata of one resource is larger than 8 KiB.
    MetadataTooLarge = BAD_REQUEST, "The size of the specified metadata exceeds the maximum size permitted.";
    /// A request input is not valid (a batch that cannot be read, say).
    InvalidInput = BAD_REQUEST, "One of the request inputs is not valid.";
    /// A blob index tag breaks the rules: a key of 1 to 128 characters, a value of up to 256,
    /// of letters, digits, space and `+ - . / : = _`, each key once.
    InvalidTag = BAD_REQUEST, "The tags specified are invalid: a key or value has characters or a length not permitted.";
    /// More than 10 blob index tags.
    TagsTooLarge = BAD_REQUEST, "The tags specified exceed the maximum of 10 a blob may have.";
    /// A change or delete of a blob (or its container) under a legal hold.
    BlobImmutableDueToLegalHold = CONFLICT, "This operation is not permitted as the blob is immutable due to one or more legal holds.";
    /// A change or delete of a blob (or its container) under a time-based retention policy,
    /// or a locked policy shortened.
    BlobImmutableDueToPolicy = CONFLICT, "This operation is not permitted as the blob is immutable due to a policy.";
    /// Delete Container of a container with a locked retention policy (its own, set through
    /// the management API).
    ContainerImmutabilityPolicyLocked = CONFLICT, "The requested operation is not allowed as the container has a locked immutability policy.";
    /// Delete Container of a container under a legal hold of its own.
    ContainerHasLegalHold = CONFLICT, "The requested operation is not allowed as the container has one or more legal holds.";
    /// Delete Blob of a blob that has snapshots, without `x-ms-delete-snapshots`.
    SnapshotsPresent = CONFLICT, "This operation is not permitted because the blob has snapshots.";
    /// A request body is not the XML document the operation takes.
    InvalidXmlDocument = BAD_REQUEST, "The XML specified is not syntactically valid.";
    /// The `Content-MD5` sent with an upload is not the MD5 of its bytes.
    Md5Mismatch = BAD_REQUEST, "The MD5 value specified in the request did not match with the MD5 value calculated by the server.";
    /// The `x-ms-content-crc64` sent with an upload is not the CRC64 of its bytes.
    Crc64Mismatch = BAD_REQUEST, "The CRC64 value specified in the request did not match with the CRC64 value calculated by the server.";
    /// A copy's source cannot be read: its URL is not one of this server's blobs, or the
    /// request's credentials, a shared access signature in the URL or the container's public
    /// access do not let it be read.
    CannotVerifyCopySource = FORBIDDEN, "The copy source cannot be read with the credentials given.";
    /// A condition in `x-ms-source-if-*` was not met by a copy's source.
    SourceConditionNotMet = PRECONDITION_FAILED, "The source condition specified using HTTP conditional header(s) is not met.";
    /// Abort Copy Blob found no copy in progress (copies here finish before they answer).
    NoPendingCopyOperation = CONFLICT, "There is currently no pending copy operation.";
    /// Abort Copy Blob named another copy than the blob's last.
    CopyIdMismatch = CONFLICT, "The specified copy ID did not match the copy ID for the pending copy operation.";
    /// Append Block's `x-ms-blob-condition-appendpos` is not the blob's length.
    AppendPositionConditionNotMet = PRECONDITION_FAILED, "The append position condition specified was not met.";
    /// Append Block would make the blob longer than `x-ms-blob-condition-maxsize`.
    MaxBlobSizeConditionNotMet = PRECONDITION_FAILED, "The max blob size condition specified was not met.";
    /// The operation is for another blob type (Append Block on a block blob, a block on an
    /// append blob).
    InvalidBlobType = CONFLICT, "The blob type is invalid for this operation.";
    /// Put Page's or Get Page Ranges' range is not whole pages, or passes the blob's size.
    InvalidPageRange = RANGE_NOT_SATISFIABLE, "The page range specified is invalid.";
    /// Put Page's `x-ms-if-sequence-number-le`, `-lt` or `-eq` is not met by the page blob.
    SequenceNumberConditionNotMet = PRECONDITION_FAILED, "The sequence number condition specified was not met.";
    /// Set Blob Properties' `increment` would take the sequence number past 2^63 - 1.
    SequenceNumberIncrementTooLarge = CONFLICT, "The sequence number increment cannot be performed because it would result in overflow of the sequence number.";
    /// A write of an incremental copy's destination other than the next copy.
    OperationNotAllowedOnIncrementalCopyBlob = CONFLICT, "The specified operation is not allowed on an incremental copy blob.";
    /// Incremental Copy Blob of a blob, not of a snapshot.
    IncrementalCopySourceMustBeSnapshot = CONFLICT, "The source for incremental copy request must be a snapshot.";
    /// Incremental Copy Blob of another blob than the one its destination copies.
    IncrementalCopyBlobMismatch = CONFLICT, "The specified source blob is different than the copy source of the existing incremental copy blob.";
    /// Incremental Copy Blob of a snapshot no later than the last one copied.
    IncrementalCopyOfEarlierVersionSnapshotNotAllowed = CONFLICT, "The specified snapshot is earlier than the last snapshot copied into the incremental copy blob.";
    /// Get Page Ranges' `prevsnapshot` names no snapshot of the blob.
    PreviousSnapshotNotFound = CONFLICT, "The previous snapshot is not found.";
    /// Append Block on a sealed append blob.
    BlobIsSealed = CONFLICT, "The blob is sealed and its contents cannot be modified.";
    /// A CORS preflight no rule of the service allows.
    CorsPreflightFailure = FORBIDDEN, "CORS not enabled or no matching rule found for this request.";
    /// The backend that holds versions, leases or locks cannot be reached.
    ServerBusy = SERVICE_UNAVAILABLE, "The server is currently unable to receive requests. Please retry your request.";
    /// An unexpected failure on the server.
    InternalError = INTERNAL_SERVER_ERROR, "The server encountered an internal error. Please retry the request.";
    }
}

impl ErrorCode {
    /// The XML error body: `<Error><Code>…</Code><Message>…</Message></Error>`.
    pub fn xml_body(self, message: &str) -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>{}</Code><Message>{}</Message></Error>",
            self.as_str(),
            xml_escape(message)
        )
    }
}

impl std::error::Error for ErrorCode {}

/// Whether `text` is made of characters XML 1.0 allows (its production `Char`: no control
/// character but tab, newline and carriage return, no U+FFFE or U+FFFF): text that no escape
/// can make well-formed otherwise.
pub fn is_xml_text(text: &str) -> bool {
    text.chars().all(|c| {
        matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}')
            || c >= '\u{10000}'
    })
}

/// Escapes text for an XML element or attribute.
pub fn xml_escape(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains(['&', '<', '>', '"', '\'']) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_text_is_what_xml_1_0_allows() {
        for ok in [
            "",
            "a/b",
            "tab\there",
            "\u{D7FF}\u{E000}\u{FFFD}\u{10000}\u{10FFFF}",
            "\u{7F}",
        ] {
            assert!(is_xml_text(ok), "{ok:?}");
        }
        for bad in [
            "\0",
            "a\u{1}",
            "\u{B}",
            "\u{C}",
            "\u{1F}",
            "\u{FFFE}",
            "x\u{FFFF}",
        ] {
            assert!(!is_xml_text(bad), "{bad:?}");
        }
    }

    #[test]
    fn statuses_follow_the_spec() {
        use ErrorCode::*;
        for (code, status) in [
            (ConditionNotMet, 412),
            (MultipleConditionHeadersNotSupported, 400),
            (BlobAlreadyExists, 409),
            (LeaseIdMissing, 412),
            (LeaseIdMismatchWithBlobOperation, 412),
            (LeaseNotPresentWithBlobOperation, 412),
            (LeaseAlreadyPresent, 409),
            (LeaseIdMismatchWithLeaseOperation, 409),
            (ContainerNotFound, 404),
            (InvalidPageRange, 416),
            (SequenceNumberConditionNotMet, 412),
        ] {
            assert_eq!(code.status().as_u16(), status, "{code}");
        }
        assert!(
            ErrorCode::ALL
                .iter()
                .all(|c| c.status().is_client_error() || c.status().is_server_error())
        );
    }

    #[test]
    fn xml_body_escapes_the_message() {
        let body = ErrorCode::BlobNotFound.xml_body("no <blob> & \"more\"");
        assert_eq!(
            body,
            "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>BlobNotFound</Code>\
             <Message>no &lt;blob&gt; &amp; &quot;more&quot;</Message></Error>"
        );
    }
}
