//! Asking a self-hosted model server how it serves a model, for
//! [`Provider::probe`](crate::provider::Provider::probe): vLLM and SGLang name
//! the context length in `/v1/models` (`max_model_len`), llama.cpp in `/props`
//! (`n_ctx`). Commercial APIs say neither; their adapters know their models.

use crate::http::{HttpError, Request};
use crate::provider::{ProviderError, ServedModel, http_error};
use serde_json::Value;

/// The context window `/v1/models` gives for `model`: the entry with that id,
/// or the only entry when the server lists one (llama.cpp names its single
/// model after the file, whatever the client calls it).
pub fn window_from_models(body: &Value, model: &str) -> Option<u32> {
    let data = body.get("data")?.as_array()?;
    let entry = data
        .iter()
        .find(|m| m.get("id").and_then(Value::as_str) == Some(model))
        .or_else(|| (data.len() == 1).then(|| &data[0]))?;
    positive(entry.get("max_model_len")?)
}

/// The context window in a llama.cpp `/props` answer: the per-slot
/// `default_generation_settings.n_ctx` (what one request may use), or a
/// top-level `n_ctx`.
pub fn window_from_props(body: &Value) -> Option<u32> {
    body.pointer("/default_generation_settings/n_ctx")
        .or_else(|| body.get("n_ctx"))
        .and_then(positive)
}

fn positive(v: &Value) -> Option<u32> {
    v.as_u64()
        .filter(|n| *n > 0)
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// Whether `base_url` points at `host` (`https://host/…`, any port).
pub fn is_host(base_url: &str, host: &str) -> bool {
    let rest = base_url
        .split_once("://")
        .map_or(base_url, |(_, r)| r)
        .split(['/', '?', '#'])
        .next()
        .unwrap_or("");
    let name = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let name = name.split(':').next().unwrap_or(name);
    name.eq_ignore_ascii_case(host)
}

/// GETs `url` as JSON; `None` when the server has no such route or does
/// not answer with JSON (not every server has both routes).
fn get_json(
    url: &str,
    auth: &dyn Fn(Request) -> Result<Request, HttpError>,
) -> Result<Option<Value>, ProviderError> {
    let request =
        auth(Request::get(url).header("accept", "application/json")).map_err(http_error)?;
    let resp = request.send().map_err(http_error)?;
    if resp.status != 200 {
        return Ok(None);
    }
    let text = resp.text().map_err(http_error)?;
    Ok(serde_json::from_str(&text).ok())
}

/// Probes an OpenAI-style server whose API lives at `v1_base` (`…/v1`):
/// `{v1_base}/models`, then `/props` at the server root. `auth` adds the
/// alias's key, if any, to each request.
pub fn probe_self_hosted(
    v1_base: &str,
    model: &str,
    auth: &dyn Fn(Request) -> Result<Request, HttpError>,
) -> Result<ServedModel, ProviderError> {
    let v1 = v1_base.trim_end_matches('/');
    if let Some(window) = get_json(&format!("{v1}/models"), auth)?
        .as_ref()
        .and_then(|b| window_from_models(b, model))
    {
        return Ok(ServedModel {
            context_window: Some(window),
        });
    }
    let root = v1.strip_suffix("/v1").unwrap_or(v1);
    let window = get_json(&format!("{root}/props"), auth)?
        .as_ref()
        .and_then(window_from_props);
    Ok(ServedModel {
        context_window: window,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn vllm_names_the_window_per_served_model() {
        let body = json!({"object": "list", "data": [
            {"id": "other", "max_model_len": 8192},
            {"id": "qwen3-32b", "object": "model", "max_model_len": 32768},
        ]});
        assert_eq!(window_from_models(&body, "qwen3-32b"), Some(32768));
        assert_eq!(
            window_from_models(&body, "missing"),
            None,
            "two entries, none ours"
        );
        let single = json!({"data": [{"id": "/models/q.gguf", "max_model_len": 4096}]});
        assert_eq!(window_from_models(&single, "local"), Some(4096));
        let llama = json!({"data": [{"id": "q.gguf", "meta": {"n_ctx_train": 131072}}]});
        assert_eq!(
            window_from_models(&llama, "q.gguf"),
            None,
            "the training context is not what the server runs with"
        );
        assert_eq!(
            window_from_models(&json!({"data": [{"id": "m", "max_model_len": 0}]}), "m"),
            None
        );
    }

    #[test]
    fn llama_cpp_names_the_slot_context() {
        let props = json!({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1});
        assert_eq!(window_from_props(&props), Some(4096));
        assert_eq!(window_from_props(&json!({"n_ctx": 2048})), Some(2048));
        assert_eq!(window_from_props(&json!({"total_slots": 1})), None);
        assert_eq!(window_from_props(&json!({"n_ctx": "big"})), None);
    }

    #[test]
    fn hosts_are_compared_by_name_only() {
        assert!(is_host("https://api.openai.com/v1", "api.openai.com"));
        assert!(is_host("https://API.openai.com:443", "api.openai.com"));
        assert!(!is_host("http://localhost:8000/v1", "api.openai.com"));
        assert!(!is_host(
            "https://api.openai.com.evil.example/v1",
            "api.openai.com"
        ));
        assert!(!is_host(
            "https://user@evil.example/api.openai.com",
            "api.openai.com"
        ));
    }
}
