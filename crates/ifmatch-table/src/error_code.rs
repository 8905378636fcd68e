//! The error codes of the Table service dialect, each with the status it is answered with: one
//! table (declared as the blob dialect's are, `ifmatch_azure::error_codes!`), so that no answer
//! pairs a code with another status.

ifmatch_azure::error_codes! {
    /// An error code of the Azure Table storage REST dialect.
    #[non_exhaustive]
    pub enum ErrorCode {
    /// A request input is not valid: a body, a key, a query parameter.
    InvalidInput = BAD_REQUEST, "One of the request inputs is not valid.";
    /// The path names no account of this server.
    InvalidUri = BAD_REQUEST, "The requested URI does not represent any resource on the server.";
    /// A table name that Azure refuses.
    InvalidResourceName = BAD_REQUEST, "The specified resource name contains invalid characters.";
    /// The method does nothing at this path.
    MethodNotAllowed = METHOD_NOT_ALLOWED, "The requested method is not allowed on the specified resource.";
    /// A header the operation needs (`If-Match` on a delete) is missing.
    MissingRequiredHeader = BAD_REQUEST, "A required HTTP header was not specified.";
    /// The body is larger than the service takes.
    RequestBodyTooLarge = PAYLOAD_TOO_LARGE, "The request body is too large.";
    /// The credentials do not reach what the request asks (a table SAS's key range).
    AuthorizationFailure = FORBIDDEN, "This request is not authorized to perform this operation.";
    /// The table is not there.
    TableNotFound = NOT_FOUND, "The table specified does not exist.";
    /// Create Table named a table that is there.
    TableAlreadyExists = CONFLICT, "The table specified already exists.";
    /// The entity (or the table of Delete Table) is not there.
    ResourceNotFound = NOT_FOUND, "The specified resource does not exist.";
    /// Insert Entity named an entity that is there.
    EntityAlreadyExists = CONFLICT, "The specified entity already exists.";
    /// `If-Match` names another version than the entity's.
    UpdateConditionNotSatisfied = PRECONDITION_FAILED, "The update condition specified in the request was not satisfied.";
    /// An entity is larger than 1 MiB.
    EntityTooLarge = BAD_REQUEST, "The entity is larger than the maximum size permitted.";
    /// A batch names an entity twice.
    InvalidDuplicateRow = BAD_REQUEST, "The batch request contains multiple changes with same row key.";
    /// A batch's operations name two partitions.
    CommandsInBatchActOnDifferentPartitions = BAD_REQUEST, "All commands in a batch must operate on same entity group.";
    /// A property name longer than 255 characters.
    PropertyNameTooLong = BAD_REQUEST, "The property name exceeds the maximum allowed length.";
    /// A value that is not of the type its annotation names.
    InvalidValueType = BAD_REQUEST, "The value specified is invalid.";
    /// A property is named twice in one body.
    DuplicatePropertiesSpecified = BAD_REQUEST, "A property is specified more than one time.";
    /// More than 255 properties.
    TooManyProperties = BAD_REQUEST, "The entity contains more properties than allowed.";
    /// A key is longer than 1 KiB.
    KeyValueTooLarge = BAD_REQUEST, "The size of the key value exceeds the maximum allowed.";
    /// A value out of its type's range, or a key with a character Azure refuses.
    OutOfRangeInput = BAD_REQUEST, "One of the request inputs is out of range.";
    /// A property name Azure refuses.
    PropertyNameInvalid = BAD_REQUEST, "The property name is invalid.";
    /// A string or binary value over 64 KiB.
    PropertyValueTooLarge = BAD_REQUEST, "The property value exceeds the maximum allowed size.";
    /// Another write came first, where the operation does not decide again.
    Conflict = CONFLICT, "Another write came first.";
    /// The storage did not answer: try again.
    ServerBusy = SERVICE_UNAVAILABLE, "The server is currently unable to receive requests. Please retry your request.";
    }
}
