//! The error codes of the Table service dialect, each with the status it is answered with: one
//! table, so that no answer pairs a code with another status.

use http::StatusCode;

macro_rules! error_codes {
    ($($(#[$doc:meta])* $name:ident = $status:ident;)*) => {
        /// An error code of the Azure Table storage REST dialect.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $($(#[$doc])* $name,)*
        }

        impl ErrorCode {
            /// The code as it appears in `x-ms-error-code` and the JSON body.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$name => stringify!($name),)* }
            }

            /// The HTTP status this code is answered with.
            pub fn status(self) -> StatusCode {
                match self { $(Self::$name => StatusCode::$status,)* }
            }
        }

        impl std::fmt::Display for ErrorCode {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

error_codes! {
    /// A request input is not valid: a body, a key, a query parameter.
    InvalidInput = BAD_REQUEST;
    /// The path names no account of this server.
    InvalidUri = BAD_REQUEST;
    /// A table name that Azure refuses.
    InvalidResourceName = BAD_REQUEST;
    /// The method does nothing at this path.
    MethodNotAllowed = METHOD_NOT_ALLOWED;
    /// A header the operation needs (`If-Match` on a delete) is missing.
    MissingRequiredHeader = BAD_REQUEST;
    /// The body is larger than the service takes.
    RequestBodyTooLarge = PAYLOAD_TOO_LARGE;
    /// The credentials do not reach what the request asks (a table SAS's key range).
    AuthorizationFailure = FORBIDDEN;
    /// The table is not there.
    TableNotFound = NOT_FOUND;
    /// Create Table named a table that is there.
    TableAlreadyExists = CONFLICT;
    /// The entity (or the table of Delete Table) is not there.
    ResourceNotFound = NOT_FOUND;
    /// Insert Entity named an entity that is there.
    EntityAlreadyExists = CONFLICT;
    /// `If-Match` names another version than the entity's.
    UpdateConditionNotSatisfied = PRECONDITION_FAILED;
    /// An entity is larger than 1 MiB.
    EntityTooLarge = BAD_REQUEST;
    /// A batch names an entity twice.
    InvalidDuplicateRow = BAD_REQUEST;
    /// A batch's operations name two partitions.
    CommandsInBatchActOnDifferentPartitions = BAD_REQUEST;
    /// A property name longer than 255 characters.
    PropertyNameTooLong = BAD_REQUEST;
    /// A value that is not of the type its annotation names.
    InvalidValueType = BAD_REQUEST;
    /// A property is named twice in one body.
    DuplicatePropertiesSpecified = BAD_REQUEST;
    /// More than 255 properties.
    TooManyProperties = BAD_REQUEST;
    /// A key is longer than 1 KiB.
    KeyValueTooLarge = BAD_REQUEST;
    /// A value out of its type's range, or a key with a character Azure refuses.
    OutOfRangeInput = BAD_REQUEST;
    /// A property name Azure refuses.
    PropertyNameInvalid = BAD_REQUEST;
    /// A string or binary value over 64 KiB.
    PropertyValueTooLarge = BAD_REQUEST;
    /// Another write came first, where the operation does not decide again.
    Conflict = CONFLICT;
    /// The storage did not answer: try again.
    ServerBusy = SERVICE_UNAVAILABLE;
}
