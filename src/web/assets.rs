//! CSS, JS and the icon from `static/`, compiled into the binary so it serves them
//! from any working directory. With
//! [`WebConfig::static_dir`](super::WebConfig::static_dir) set, files there
//! win (tower-http `ServeDir`), for editing without rebuilding. Pages link
//! them with `?v=<hash>`, so they can be cached for a day.

use std::sync::OnceLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};

const CSS: &str = include_str!("../../static/app.css");
const JS: &str = include_str!("../../static/app.js");
const ICON: &str = include_str!("../../static/favicon.svg");

/// A short hash of the compiled-in assets, for cache-busting URLs.
pub fn version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let hash = CSS
            .bytes()
            .chain(JS.bytes())
            .chain(ICON.bytes())
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
        format!("{:08x}", hash as u32)
    })
}

/// The compiled-in asset `name`, or `None` for anything else (the caller
/// answers 404, an HTML page like every page outside `/api/`).
/// (`GET /static/{file}` is [`super::pages::asset`].)
pub fn embedded(name: &str) -> Option<Response> {
    let (content_type, body) = match name {
        "app.css" => ("text/css; charset=utf-8", CSS),
        "app.js" => ("text/javascript; charset=utf-8", JS),
        "favicon.svg" => ("image/svg+xml", ICON),
        _ => return None,
    };
    Some(
        (
            [
                (header::CONTENT_TYPE, content_type),
                (header::CACHE_CONTROL, "public, max-age=86400"),
            ],
            body,
        )
            .into_response(),
    )
}
