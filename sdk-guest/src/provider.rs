//! Writing LLM provider adapters: implement [`Provider`] and call
//! [`register_provider!`](crate::register_provider). The host grants the
//! adapter its API host and injects the API key (see [`crate::http`]); events
//! stream back through [`emit`].

/// Generated bindings of the provider world (imports shared with the tool world).
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "provider-plugin",
        path: "../wit/v0.2.0",
        pub_export_macro: true,
        export_macro_name: "__export_provider_plugin",
        default_bindings_module: "turnstone_plugin_sdk::provider::bindings",
        with: {
            "turnstone:plugin/types@0.1.0": crate::bindings::turnstone::plugin0_1_0::types,
            "turnstone:plugin/log@0.1.0": crate::bindings::turnstone::plugin0_1_0::log,
            "turnstone:plugin/config@0.1.0": crate::bindings::turnstone::plugin0_1_0::config,
            "turnstone:plugin/process@0.1.0": crate::bindings::turnstone::plugin0_1_0::process,
            "turnstone:plugin/kv@0.1.0": crate::bindings::turnstone::plugin0_1_0::kv,
            "turnstone:plugin/clock@0.1.0": crate::bindings::turnstone::plugin0_1_0::clock,
            "turnstone:plugin/session-info@0.2.0": crate::bindings::turnstone::plugin0_2_0::session_info,
            "turnstone:plugin/memory@0.2.0": crate::bindings::turnstone::plugin0_2_0::memory,
            "turnstone:plugin/history@0.2.0": crate::bindings::turnstone::plugin0_2_0::history,
            "turnstone:plugin/skills@0.2.0": crate::bindings::turnstone::plugin0_2_0::skills,
            "turnstone:plugin/agents@0.2.0": crate::bindings::turnstone::plugin0_2_0::agents,
            "turnstone:plugin/watches@0.2.0": crate::bindings::turnstone::plugin0_2_0::watches,
            "turnstone:plugin/notify-targets@0.2.0": crate::bindings::turnstone::plugin0_2_0::notify_targets,
            "turnstone:plugin/preview@0.2.0": crate::bindings::turnstone::plugin0_2_0::preview,
            "turnstone:plugin/provider-types@0.1.0": generate,
            "turnstone:plugin/provider-events@0.1.0": generate,
        },
    });
}

pub use crate::delta_batch::DeltaBatch;
use crate::http::HttpError;
use serde_json::Value;

/// Inline image data (a media type and base64 bytes).
pub use crate::bindings::turnstone::plugin0_1_0::types::ImageData;
pub use bindings::turnstone::plugin0_1_0::provider_types::{
    ContentPart, FinishReason, Message, ProviderError, RateLimit, Role, ServerError, StreamEvent,
    ToolCall, ToolCallDelta, Usage,
};
pub use bindings::turnstone::plugin0_2_0::provider_types::{
    CompletionRequest, ModelCapabilities, ServedModel, ToolDefinition,
};

/// The concatenated text parts of a message's content.
pub fn text_of(parts: &[ContentPart]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            ContentPart::Text(t) => Some(t.as_str()),
            ContentPart::Image(_) => None,
        })
        .collect()
}

/// The text of `parts` like [`text_of`], borrowed when it is one text part
/// (nearly always), so a request body can write it without a copy.
pub fn text_cow(parts: &[ContentPart]) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    match parts {
        [ContentPart::Text(t)] => Cow::Borrowed(t),
        [] => Cow::Borrowed(""),
        _ => Cow::Owned(text_of(parts)),
    }
}

/// A parser for one provider's SSE stream.
pub trait SseHandler {
    /// Handles one event's `data` payload.
    fn handle(&mut self, data: &str) -> Result<(), ProviderError>;
    /// True once the terminal event arrived (reading stops early).
    fn done(&self) -> bool;
    /// Checks the stream ended properly.
    fn end(&mut self) -> Result<(), ProviderError>;
    /// Called after the events of each network read were handled, before
    /// waiting for the next: a handler that holds back deltas (a
    /// [`DeltaBatch`]) sends them now. Also called before an error from
    /// [`SseHandler::handle`] is returned, so text that arrived before the
    /// error is not lost.
    fn flush(&mut self) -> Result<(), ProviderError> {
        Ok(())
    }
}

/// Sends a streaming request; a non-200 answer becomes the typed error its
/// status and body describe (with `retry-after` for rate limits).
pub fn send_streaming(
    request: crate::http::Request,
) -> Result<crate::http::Response, ProviderError> {
    streaming_response(request.send())
}

/// [`send_streaming`] with `body` serialized as JSON straight into the
/// request stream ([`crate::http::Request::send_json`]): the body text is
/// never held whole in the guest's memory.
pub fn send_streaming_json<T: serde::Serialize + ?Sized>(
    request: crate::http::Request,
    body: &T,
) -> Result<crate::http::Response, ProviderError> {
    streaming_response(request.send_json(body))
}

fn streaming_response(
    sent: Result<crate::http::Response, crate::http::HttpError>,
) -> Result<crate::http::Response, ProviderError> {
    let resp = sent.map_err(http_error)?;
    if resp.status == 200 {
        return Ok(resp);
    }
    let retry_after = resp.header("retry-after").map(str::to_string);
    let status = resp.status;
    let body = resp
        .text()
        .unwrap_or_else(|e| format!("(body unreadable: {e})"));
    Err(status_error(status, &body, retry_after.as_deref()))
}

/// Reads `response` to the end (or the handler's terminal event), feeding each
/// SSE event to `handler`.
pub fn drive_sse(
    response: &mut crate::http::Response,
    handler: &mut dyn SseHandler,
) -> Result<(), ProviderError> {
    let mut decoder = crate::sse::SseDecoder::default();
    loop {
        let chunk = match response.next_chunk() {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break,
            Err(e) => {
                handler.flush()?;
                return Err(http_error(e));
            }
        };
        if let Err(e) = decoder.push_each(&chunk, |data| handler.handle(data)) {
            // What arrived before the error still reaches the host.
            let _ = handler.flush();
            return Err(e);
        }
        if handler.done() {
            return handler.end();
        }
        handler.flush()?;
    }
    for data in decoder.finish() {
        if let Err(e) = handler.handle(&data) {
            let _ = handler.flush();
            return Err(e);
        }
    }
    handler.end()
}

/// For `#[serde(deserialize_with = ...)]` on an `Option<Cow<'a, str>>`
/// field: the string borrowed from the payload when it holds no escapes
/// (serde's `borrow` alone leaves an `Option<Cow<str>>` owned), so an
/// adapter's stream text costs no allocation of its own.
pub fn borrowed_text<'de: 'a, 'a, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<std::borrow::Cow<'a, str>>, D::Error> {
    #[derive(serde::Deserialize)]
    struct Text<'a>(#[serde(borrow)] std::borrow::Cow<'a, str>);
    Ok(<Option<Text> as serde::Deserialize>::deserialize(d)?.map(|t| t.0))
}

/// Sends one event to the host; false means "stop streaming now".
pub fn emit(event: &StreamEvent) -> bool {
    bindings::turnstone::plugin0_1_0::provider_events::emit(event)
}

/// An LLM provider adapter.
pub trait Provider {
    /// Capabilities of `model` (context window, vision, …).
    fn capabilities(model: &str) -> ModelCapabilities;
    /// The JSON body that `complete` sends for `request`.
    fn build_request(request: &CompletionRequest) -> Result<String, ProviderError>;
    /// Sends the request and streams events with [`emit`] until the response ends.
    fn complete(request: &CompletionRequest) -> Result<(), ProviderError>;
    /// What the host calls: [`complete`](Provider::complete) with the
    /// request handed over. An adapter that overrides it can drop the
    /// request (its tool schemas are most of it) once the response's head
    /// has arrived, so the buffers that read the response reuse that memory
    /// instead of growing the instance's heap for the rest of the stream.
    /// Both must behave the same: `complete` is what an adapter's own tests
    /// and other callers in the component use.
    fn complete_owned(request: CompletionRequest) -> Result<(), ProviderError> {
        Self::complete(&request)
    }
    /// Asks the server behind `request.base_url` how it serves `request.model`
    /// (its context window). The default knows nothing and sends nothing.
    fn probe(request: &CompletionRequest) -> Result<ServedModel, ProviderError> {
        let _ = request;
        Ok(ServedModel {
            context_window: None,
        })
    }
}

/// Maps an HTTP error status and body to a typed provider error.
pub fn status_error(status: u16, body: &str, retry_after: Option<&str>) -> ProviderError {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let message = v
        .pointer("/error/message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| body.chars().take(500).collect());
    let code = v
        .pointer("/error/code")
        .and_then(Value::as_str)
        .unwrap_or("");
    let lower = message.to_ascii_lowercase();
    match status {
        401 | 403 => ProviderError::Auth(message),
        429 => ProviderError::RateLimit(RateLimit {
            message,
            retry_after_ms: retry_after.and_then(retry_after_ms),
        }),
        400 | 413
            if code == "context_length_exceeded"
                || lower.contains("context length")
                || lower.contains("prompt is too long")
                || lower.contains("maximum context")
                || lower.contains("too many tokens") =>
        {
            ProviderError::ContextLength(message)
        }
        400..=499 => ProviderError::BadRequest(format!("HTTP {status}: {message}")),
        _ => ProviderError::Server(ServerError { status, message }),
    }
}

/// Milliseconds in a `retry-after` value of delay-seconds, including the
/// fractional seconds some servers send (`0.3`); anything else (an HTTP date,
/// a negative number, more milliseconds than a `u64` holds) is `None` and the
/// host's own backoff applies.
///
/// Read by hand rather than as an `f64`: float parsing brings core's 10 KiB
/// table of powers of five (and its code) into every provider component's
/// data image, which each instance maps whole: three pages more per stream
/// in flight for the openai adapter.
fn retry_after_ms(value: &str) -> Option<u64> {
    let value = value.trim();
    let (whole, frac) = value.split_once('.').unwrap_or((value, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && frac.is_empty()) || !digits(whole) || !digits(frac) {
        return None;
    }
    let secs: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let ms = frac
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0, |ms, d| ms * 10 + u64::from(d - b'0'));
    secs.checked_mul(1000)?.checked_add(ms)
}

/// Maps an SDK HTTP failure to a typed provider error.
pub fn http_error(e: HttpError) -> ProviderError {
    match e {
        HttpError::Denied(d) => ProviderError::Auth(crate::describe_denial(&d)),
        HttpError::InvalidUrl(m) => ProviderError::BadRequest(m),
        HttpError::Transport(m) => ProviderError::Network(m),
    }
}

#[doc(hidden)]
pub mod __private {
    pub use super::bindings::exports::turnstone::plugin0_2_0::provider::Guest;
}

/// Exports a [`Provider`] implementation as this component's provider.
#[macro_export]
macro_rules! register_provider {
    ($provider:ty) => {
        #[doc(hidden)]
        pub struct __TurnstoneProvider;

        impl $crate::provider::__private::Guest for __TurnstoneProvider {
            fn capabilities(model: ::std::string::String) -> $crate::provider::ModelCapabilities {
                <$provider as $crate::provider::Provider>::capabilities(&model)
            }

            fn build_request(
                request: $crate::provider::CompletionRequest,
            ) -> ::std::result::Result<::std::string::String, $crate::provider::ProviderError> {
                <$provider as $crate::provider::Provider>::build_request(&request)
            }

            fn complete(
                request: $crate::provider::CompletionRequest,
            ) -> ::std::result::Result<(), $crate::provider::ProviderError> {
                <$provider as $crate::provider::Provider>::complete_owned(request)
            }

            fn probe(
                request: $crate::provider::CompletionRequest,
            ) -> ::std::result::Result<$crate::provider::ServedModel, $crate::provider::ProviderError>
            {
                <$provider as $crate::provider::Provider>::probe(&request)
            }
        }

        $crate::provider::bindings::__export_provider_plugin!(
            __TurnstoneProvider with_types_in $crate::provider::bindings
        );
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(retry_after: &str) -> Option<u64> {
        match status_error(429, "{}", Some(retry_after)) {
            ProviderError::RateLimit(r) => r.retry_after_ms,
            other => panic!("429 is a rate limit, got {other:?}"),
        }
    }

    #[test]
    fn text_is_borrowed_when_it_is_one_part_and_joined_like_text_of_otherwise() {
        use std::borrow::Cow;
        let one = [ContentPart::Text("only".into())];
        assert!(matches!(text_cow(&one), Cow::Borrowed("only")));
        assert!(matches!(text_cow(&[]), Cow::Borrowed("")));
        let image = ContentPart::Image(ImageData {
            media_type: "image/png".into(),
            data_base64: "AA".into(),
        });
        let parts = [
            ContentPart::Text("a".into()),
            image.clone(),
            ContentPart::Text("b".into()),
        ];
        assert!(matches!(text_cow(&parts), Cow::Owned(ref t) if t == "ab"));
        assert_eq!(text_cow(&parts), text_of(&parts));
        assert_eq!(text_cow(&[image]), "");
    }

    #[test]
    fn retry_after_seconds_whole_or_fractional_become_milliseconds() {
        assert_eq!(wait("3"), Some(3000));
        assert_eq!(wait(" 0.3 "), Some(300));
        assert_eq!(wait("2.5"), Some(2500));
        assert_eq!(wait(".25"), Some(250));
        assert_eq!(wait("7."), Some(7000));
        // Beyond milliseconds the digits are dropped, not rounded.
        assert_eq!(wait("1.2349"), Some(1234));
        assert_eq!(wait("0"), Some(0));
    }

    #[test]
    fn a_retry_after_that_is_not_delay_seconds_is_left_to_the_host() {
        for v in [
            "",
            ".",
            "-1",
            "1e3",
            "1.2.3",
            "soon",
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "99999999999999999999999",
            // Fits a u64 as seconds, not as milliseconds.
            "18446744073709552",
        ] {
            assert_eq!(wait(v), None, "{v:?}");
        }
        match status_error(429, "{}", None) {
            ProviderError::RateLimit(r) => assert_eq!(r.retry_after_ms, None),
            other => panic!("{other:?}"),
        }
    }
}
