//! The error codes of the blob dialect: its own, with their statuses and messages, and the
//! codes every storage service shares ([`ifmatch_azure::CommonCode`]), which it answers as its
//! own. A blob-dialect error answers with its status, an `x-ms-error-code` header and an XML
//! body ([`ErrorCode::xml_body`]); the native server and the Worker build the response from
//! this one table so they cannot drift.

use ifmatch_azure::CommonCode;

ifmatch_azure::error_codes! {
    /// An error code of the Azure Blob Storage REST dialect.
    #[non_exhaustive]
    pub enum ErrorCode {
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
    }
    shared CommonCode {
        ConditionNotMet,
        MultipleConditionHeadersNotSupported,
        UnsupportedHeader,
        MissingRequiredHeader,
        MissingContentLengthHeader,
        InvalidHeaderValue,
        InvalidQueryParameterValue,
        InvalidResourceName,
        InvalidUri,
        InvalidRange,
        UnsupportedHttpVerb,
        IncompleteBody,
        RequestBodyTooLarge,
        InvalidAuthenticationInfo,
        AuthenticationFailed,
        AuthorizationPermissionMismatch,
        AuthorizationResourceTypeMismatch,
        AuthorizationServiceMismatch,
        AuthorizationProtocolMismatch,
        AuthorizationSourceIPMismatch,
        InvalidMetadata,
        MetadataTooLarge,
        InvalidInput,
        InvalidXmlDocument,
        Md5Mismatch,
        CorsPreflightFailure,
        ServerBusy,
        InternalError,
    }
}

impl ErrorCode {
    /// The XML error body: `<Error><Code>…</Code><Message>…</Message></Error>`.
    pub fn xml_body(self, message: &str) -> String {
        ifmatch_azure::xml_error_body(self.as_str(), message)
    }
}

impl std::error::Error for ErrorCode {}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_shared_code_is_the_same_code_with_the_same_status() {
        for &common in CommonCode::ALL {
            let code = ErrorCode::from(common);
            assert_eq!(
                (code.as_str(), code.status(), code.message()),
                (common.as_str(), common.status(), common.message())
            );
        }
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
