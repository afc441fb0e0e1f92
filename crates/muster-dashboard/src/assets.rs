//! The pages' style sheet and script, served as files so that the Content-Security-Policy can
//! allow this origin's files and forbid every inline style and script.

use axum::http::header;
use axum::response::IntoResponse;

pub const STYLE_PATH: &str = "/assets/dashboard.css";
pub const SCRIPT_PATH: &str = "/assets/dashboard.js";

/// Milliseconds between reloads of a page's content.
const RELOAD_MS: u32 = 3000;

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}\
table{border-collapse:collapse}td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}\
th{background:#f4f4f4}.muted,.empty{color:#777}\
.bar.running{fill:#2e7d32}.bar.reserved{fill:#1565c0}.bar.estimated{fill:#90caf9}.set-aside{fill:#f9a825;opacity:.35}\
.now{stroke:#c62828;stroke-width:2}.tick{stroke:#eee}text.tick{fill:#777;font-size:11px;stroke:none}\
text.node{font-size:11px;fill:#444}text.bar-label{font-size:10px;fill:#fff}\
meter{width:80px;height:10px;margin-right:6px;vertical-align:middle}\
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}\
.legend .running{background:#2e7d32}.legend .reserved{background:#1565c0}.legend .estimated{background:#90caf9}\
.legend .set-aside{background:#f9a825;opacity:.5}";

/// Reloads `<main>` of a page that asks for it (`data-reload`); the server answers a request
/// with the header `X-Muster-Fragment` with the content alone.
fn script() -> String {
    format!(
        "setInterval(async()=>{{const m=document.querySelector('main[data-reload]');if(!m)return;\
         try{{const r=await fetch(location.href,{{headers:{{'X-Muster-Fragment':'1'}}}});\
         if(r.ok)m.innerHTML=await r.text();}}catch(e){{}}}},{RELOAD_MS});"
    )
}

pub async fn style() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE)
}

pub async fn script_file() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], script())
}
