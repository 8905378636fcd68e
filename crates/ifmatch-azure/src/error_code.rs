//! The error codes every storage service shares (Azure's common REST API error codes), with
//! their statuses and messages, and the macro each dialect declares its own table with: the
//! blob dialect's is `ifmatch_blob::ErrorCode`, the Table's and the Queue's in their crates.
//! A dialect whose answers are XML (blobs, queues) writes them with [`xml_error_body`].

/// Declares a dialect's error codes, each with the status it is answered with and its standard
/// message (`Code = STATUS, "message";`, inside `pub enum Name { ... }`), and, after the
/// table, `shared CommonCode { Code, ... }`: the shared codes the dialect answers as its own,
/// their statuses and messages [`CommonCode`]'s, with `From<CommonCode>` (every shared code
/// must be listed: the match is exhaustive). The enum gets `as_str`, `status`, `message`, `ALL`
/// and `Display`. One table per dialect, so that no answer pairs a code with another status.
#[macro_export]
macro_rules! error_codes {
    ($(#[$meta:meta])* pub enum $enum:ident {
        $($(#[$doc:meta])* $name:ident = $status:ident, $message:literal;)*
    } $(shared $common:ident { $($shared:ident,)* })?) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        pub enum $enum {
            $($(#[$doc])* $name,)*
            $($(#[doc = "A code every service shares (see `CommonCode`)."] $shared,)*)?
        }

        impl $enum {
            /// The code as it appears in `x-ms-error-code` and the error body.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$name => stringify!($name),)*
                    $($(Self::$shared => stringify!($shared),)*)?
                }
            }

            /// The code as an `x-ms-error-code` value: made when compiled (`from_static`
            /// called at run time checks each byte again, on every error answer and 304).
            pub fn header_value(self) -> ::http::HeaderValue {
                match self {
                    $(Self::$name => const { ::http::HeaderValue::from_static(stringify!($name)) },)*
                    $($(Self::$shared => const { ::http::HeaderValue::from_static(stringify!($shared)) },)*)?
                }
            }

            /// The HTTP status this code is answered with.
            pub fn status(self) -> ::http::StatusCode {
                match self {
                    $(Self::$name => ::http::StatusCode::$status,)*
                    $($(Self::$shared => $common::$shared.status(),)*)?
                }
            }

            /// A human-readable description.
            pub fn message(self) -> &'static str {
                match self {
                    $(Self::$name => $message,)*
                    $($(Self::$shared => $common::$shared.message(),)*)?
                }
            }

            /// Every code, for tests and documentation.
            pub const ALL: &'static [$enum] = &[$(Self::$name,)* $($(Self::$shared,)*)?];
        }

        $(impl From<$common> for $enum {
            fn from(code: $common) -> Self {
                match code {
                    $($common::$shared => Self::$shared,)*
                }
            }
        })?

        impl ::std::fmt::Display for $enum {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

error_codes! {
    /// An error code every storage service shares. Not `non_exhaustive`: each dialect's table
    /// lists all of them (`shared CommonCode { ... }`), so a code added here is one every
    /// dialect is made to answer.
    pub enum CommonCode {
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
    /// A request body is not the XML document the operation takes.
    InvalidXmlDocument = BAD_REQUEST, "The XML specified is not syntactically valid.";
    /// The `Content-MD5` sent with an upload is not the MD5 of its bytes.
    Md5Mismatch = BAD_REQUEST, "The MD5 value specified in the request did not match with the MD5 value calculated by the server.";
    /// A CORS preflight no rule of the service allows.
    CorsPreflightFailure = FORBIDDEN, "CORS not enabled or no matching rule found for this request.";
    /// The backend that holds versions, leases or locks cannot be reached.
    ServerBusy = SERVICE_UNAVAILABLE, "The server is currently unable to receive requests. Please retry your request.";
    /// An unexpected failure on the server.
    InternalError = INTERNAL_SERVER_ERROR, "The server encountered an internal error. Please retry the request.";
    }
}

/// The XML error body of the dialects that answer in XML (blobs, queues):
/// `<Error><Code>…</Code><Message>…</Message></Error>`.
pub fn xml_error_body(code: &str, message: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>{code}</Code><Message>{}</Message></Error>",
        xml_escape(message)
    )
}

impl std::error::Error for CommonCode {}

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
        use CommonCode::*;
        for (code, status) in [
            (ConditionNotMet, 412),
            (MultipleConditionHeadersNotSupported, 400),
            (MissingContentLengthHeader, 411),
            (InvalidRange, 416),
            (AuthenticationFailed, 403),
            (RequestBodyTooLarge, 413),
            (ServerBusy, 503),
        ] {
            assert_eq!(code.status().as_u16(), status, "{code}");
        }
        assert!(
            CommonCode::ALL
                .iter()
                .all(|c| c.status().is_client_error() || c.status().is_server_error())
        );
    }

    #[test]
    fn the_xml_error_body_escapes_the_message() {
        let body = xml_error_body("ConditionNotMet", "no <blob> & \"more\"");
        assert_eq!(
            body,
            "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>ConditionNotMet</Code>\
             <Message>no &lt;blob&gt; &amp; &quot;more&quot;</Message></Error>"
        );
    }
}
