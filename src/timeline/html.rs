//! A [`Timeline`] as one self-contained HTML page: inline CSS, a small inline script (the
//! tooltip and the filter), no network, no external script or font, so that it opens from a
//! mail attachment or a CI artifact.
//!
//! Every text others wrote (issue ids, holders, notes, tasks, reasons) goes through [`escape`]
//! exactly once, where it is written: it is HTML now, and a pushed note must stay text.
//!
//! Rows are HTML with CSS, positioned in percent of the window, so the page fits any width.
//! A large history stays usable: rows off screen are neither laid out nor painted
//! (`content-visibility: auto`), and at most [`Options::limit`] rows are drawn, with a note
//! saying how many were left out and how to narrow the picture (the summary still counts
//! them all).

use std::fmt::Write as _;
use std::io::{self, Write};

use super::axis::{self, percent};
use super::{Ending, Row, Tenure, Timeline};
use crate::lease::Takeover;
use crate::time::short_duration;

/// The rows drawn when nobody says otherwise.
pub const DEFAULT_LIMIT: usize = 2000;

/// How the page is drawn.
#[derive(Clone, Debug)]
pub struct Options {
    /// The most rows drawn (`0`: every row).
    pub limit: usize,
    /// Where the ledgers were read, for the header (a remote's name or URL), if not here.
    pub source: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            limit: DEFAULT_LIMIT,
            source: None,
        }
    }
}

/// Appends `text` to `out` as HTML text or a double-quoted attribute value: `&`, `<`, `>`,
/// `"` and `'` as character references, and what a terminal would hide or act on (controls,
/// bidi overrides, zero-width characters: [`crate::text::printable`]) as visible escapes, so
/// that no holder can look like another here either.
pub fn escape(out: &mut String, text: &str) {
    for c in crate::text::printable(text).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    escape(&mut out, text);
    out
}

/// Writes `timeline` as a page to `out`.
pub fn render(timeline: &Timeline, options: &Options, out: &mut dyn Write) -> io::Result<()> {
    let mut page = String::with_capacity(64 * 1024);
    head(&mut page, timeline, options);
    let total = timeline.issues.len();
    let shown = if options.limit == 0 {
        total
    } else {
        total.min(options.limit)
    };
    if shown < total {
        let _ = writeln!(
            page,
            "<p class=\"note\" id=\"limit-note\">Showing {shown} of {total} issues ({}). \
             Narrow the picture with a prefix, <code>--since</code>, <code>--until</code> or \
             <code>--holder</code>, or draw more with <code>--limit</code> \
             (<code>--limit 0</code>: all). The summary counts every issue.</p>",
            match timeline.order {
                super::Order::Issue => "the first in issue order",
                super::Order::Recent => "the most recently active",
            }
        );
    }
    chart_open(&mut page, timeline, shown);
    out.write_all(page.as_bytes())?;
    let mut row_html = String::with_capacity(4096);
    for row in timeline.issues.iter().take(shown) {
        row_html.clear();
        draw_row(&mut row_html, row, timeline);
        out.write_all(row_html.as_bytes())?;
    }
    page.clear();
    tail(&mut page);
    out.write_all(page.as_bytes())
}

fn head(page: &mut String, t: &Timeline, options: &Options) {
    page.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    page.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    page.push_str("<meta name=\"generator\" content=\"git-lease timeline\">\n");
    page.push_str("<title>Lease timeline</title>\n<style>\n");
    page.push_str(STYLE);
    page.push_str("</style>\n</head>\n<body>\n<header>\n<h1>Lease timeline</h1>\n");
    let _ = write!(
        page,
        "<p class=\"window\" id=\"window\"><time datetime=\"{}\">{}</time> to \
         <time datetime=\"{}\">{}</time> UTC · live as of <time id=\"now\" datetime=\"{}\">{}</time>",
        crate::time::format_instant(t.since),
        axis::instant(t.since),
        crate::time::format_instant(t.until),
        axis::instant(t.until),
        crate::time::format_instant(t.now),
        axis::instant(t.now),
    );
    if let Some(source) = &options.source {
        page.push_str(" · from ");
        escape(page, &crate::redact::url(source));
    }
    page.push_str("</p>\n</header>\n");
    let s = &t.summary;
    page.push_str("<section class=\"summary\" id=\"summary\">\n");
    let mean = s.mean_held_seconds.map_or("–".to_owned(), |m| {
        short_duration(chrono::Duration::seconds(m.round() as i64))
    });
    for (id, value, what) in [
        ("live", s.live.to_string(), "live leases"),
        ("holders", s.holders.to_string(), "holders"),
        ("tenures", s.tenures.to_string(), "tenures in the window"),
        (
            "expiries-taken-over",
            s.expiries_taken_over.to_string(),
            "expiries taken over",
        ),
        ("mean-held", mean, "mean time held"),
    ] {
        let _ = writeln!(
            page,
            "<div class=\"stat\" id=\"stat-{id}\"><b>{value}</b><span>{what}</span></div>"
        );
    }
    page.push_str("</section>\n<div class=\"tools\">\n<ul class=\"legend\">");
    for ending in Ending::ALL {
        let count = s.endings.get(ending.as_str()).copied().unwrap_or(0);
        let _ = write!(
            page,
            "<li><i class=\"swatch ending-{}\"></i>{} <small>{count}</small></li>",
            ending.as_str(),
            ending.label()
        );
    }
    page.push_str(
        "<li><i class=\"swatch renewal-swatch\"></i>renewal</li></ul>\n\
         <input type=\"search\" id=\"filter\" placeholder=\"Filter by issue or holder\" \
         aria-label=\"Filter by issue or holder\">\n</div>\n",
    );
}

fn chart_open(page: &mut String, t: &Timeline, shown: usize) {
    let _ = write!(
        page,
        "<div class=\"chart\" id=\"chart\" data-rows=\"{shown}\">\n<div class=\"axis\">\
         <div class=\"corner\">issue</div><div class=\"scale\">"
    );
    let ticks = axis::ticks(t.since, t.until);
    let now_in = t.since <= t.now && t.now <= t.until;
    let now_at = percent(t.now, t.since, t.until);
    for tick in &ticks {
        let x = percent(tick.at, t.since, t.until);
        // The "now" flag takes the place of a label it would cover.
        if now_in && (x - now_at).abs() < 4.0 {
            continue;
        }
        let edge = if x < 4.0 {
            " edge-start"
        } else if x > 96.0 {
            " edge-end"
        } else {
            ""
        };
        let _ = write!(
            page,
            "<span class=\"tick{edge}\" style=\"left:{x:.3}%\">{}</span>",
            tick.label
        );
    }
    if now_in {
        let _ = write!(
            page,
            "<span class=\"now-label\" style=\"left:{:.3}%\">now</span>",
            percent(t.now, t.since, t.until)
        );
    }
    page.push_str(
        "</div></div>\n<div class=\"rows\" id=\"rows\">\n<div class=\"grid\" aria-hidden=\"true\">",
    );
    for tick in &ticks {
        let _ = write!(
            page,
            "<i style=\"left:{:.3}%\"></i>",
            percent(tick.at, t.since, t.until)
        );
    }
    if now_in {
        let _ = write!(
            page,
            "<i class=\"now-line\" style=\"left:{:.3}%\"></i>",
            percent(t.now, t.since, t.until)
        );
    }
    page.push_str("</div>\n");
    if shown == 0 {
        page.push_str("<p class=\"empty\" id=\"empty\">No tenure in this window.</p>\n");
    }
}

fn draw_row(out: &mut String, row: &Row, t: &Timeline) {
    let mut holders: Vec<&str> = row.tenures.iter().map(|t| t.holder.as_str()).collect();
    holders.sort_unstable();
    holders.dedup();
    out.push_str("<div class=\"row\" data-issue=\"");
    escape(out, &row.issue);
    out.push_str("\" data-holders=\"");
    escape(out, &holders.join(" "));
    out.push_str("\"><div class=\"issue\" title=\"");
    escape(out, &row.issue);
    out.push_str("\">");
    escape(out, &row.issue);
    out.push_str("</div><div class=\"track\">");
    for tenure in &row.tenures {
        draw_bar(out, &row.issue, tenure, t);
    }
    out.push_str("</div></div>\n");
}

/// Writes the bar of `tenure` on `issue`'s track of `t`, with its renewals and its tooltip.
fn draw_bar(out: &mut String, issue: &str, tenure: &Tenure, t: &Timeline) {
    let (since, until) = (t.since, t.until);
    let end = tenure.end_or(t.now);
    let left = percent(tenure.start, since, until);
    let right = percent(end, since, until);
    let width = (right - left).max(0.0);
    let ending = tenure.ending.as_str();
    let _ = write!(
        out,
        "<div class=\"bar ending-{ending}\" tabindex=\"0\" data-ending=\"{ending}\" \
         data-token=\"{}\" style=\"left:{left:.3}%;width:{width:.3}%\"",
        tenure.token
    );
    if left > 55.0 {
        out.push_str(" data-tip-side=\"left\"");
    }
    // Its address: `page.html#<issue>:<token>` opens the page with its details shown.
    out.push_str(" id=\"");
    escape(out, issue);
    let _ = write!(out, ":{}\" data-holder=\"", tenure.token);
    escape(out, &tenure.holder);
    out.push_str("\"><span class=\"bar-label\">");
    escape(out, &tenure.holder);
    let _ = write!(out, " <small>#{}</small></span>", tenure.token);
    for r in &tenure.renewals {
        if r.at < since || r.at > until || width <= 0.0 {
            continue;
        }
        let x = (percent(r.at, since, until) - left) / width * 100.0;
        let _ = write!(
            out,
            "<i class=\"renewal\" style=\"left:{:.2}%\" data-at=\"{}\"></i>",
            x.clamp(0.0, 100.0),
            crate::time::format_instant(r.at)
        );
    }
    if tenure.ending == Ending::Live {
        out.push_str("<span class=\"live-marker\" title=\"live\">live</span>");
    }
    out.push_str("<div class=\"tip\" role=\"tooltip\"><p class=\"tip-title\">");
    escape(out, issue);
    let _ = write!(
        out,
        " · token {} · <span class=\"tip-ending ending-{ending}\">{}</span></p><dl>",
        tenure.token,
        tenure.ending.label()
    );
    tip_fields(out, tenure, end);
    out.push_str("</dl></div></div>");
}

/// Writes the fields of `tenure`'s tooltip (which ends at `end`, or is live until then).
fn tip_fields(out: &mut String, tenure: &Tenure, end: chrono::DateTime<chrono::Utc>) {
    field(out, "holder", &tenure.holder);
    let held = short_duration(end - tenure.start);
    let span = match tenure.end {
        Some(e) => format!(
            "{} → {} ({held})",
            axis::instant(tenure.start),
            axis::instant(e)
        ),
        None => format!("{} → now ({held})", axis::instant(tenure.start)),
    };
    field(out, "held", &span);
    if let Some(e) = tenure.expires_at {
        field(
            out,
            if tenure.ending == Ending::Live {
                "expires"
            } else {
                "expiry"
            },
            &axis::instant(e),
        );
    } else if tenure.ending == Ending::Live {
        field(out, "expires", "never (open-ended)");
    }
    if let Some(why) = tenure.takeover {
        field(
            out,
            "why",
            match why {
                Takeover::Expired => "its expiry passed",
                Takeover::ProcessGone => "its holder process was gone",
            },
        );
    }
    if let Some(by) = &tenure.by {
        field(
            out,
            if tenure.ending == Ending::TakenOver {
                "taken by"
            } else {
                "by"
            },
            by,
        );
    }
    if let Some(reason) = &tenure.reason {
        field(out, "reason", reason);
    }
    if let Some(note) = &tenure.note {
        field(out, "note", note);
    }
    if let Some(task) = &tenure.task {
        field(out, "task", task);
    }
    if !tenure.renewals.is_empty() {
        let last = tenure.renewals.last().map(|r| r.at).unwrap_or(tenure.start);
        let times = if tenure.renewals.len() == 1 {
            "once".to_owned()
        } else {
            format!("{} times", tenure.renewals.len())
        };
        field(
            out,
            "renewed",
            &format!("{times}, last {}", axis::instant(last)),
        );
    }
    field_code(out, "commit", &tenure.commit);
    if let Some(c) = &tenure.end_commit {
        field_code(out, "ended by", c);
    }
}

fn field(out: &mut String, name: &str, value: &str) {
    let _ = write!(
        out,
        "<dt>{name}</dt><dd class=\"tip-{}\">",
        name.replace(' ', "-")
    );
    escape(out, value);
    out.push_str("</dd>");
}

fn field_code(out: &mut String, name: &str, commit: &str) {
    let _ = write!(out, "<dt>{name}</dt><dd><code>");
    escape(out, commit);
    out.push_str("</code></dd>");
}

fn tail(page: &mut String) {
    page.push_str("</div>\n</div>\n<div id=\"tooltip\" class=\"tooltip\" hidden></div>\n<footer>Each bar is one tenure (one fencing token) from its acquire to its end, coloured by how it ended; ticks on a bar are renewals. Times are UTC. Drawn by <code>git lease timeline</code> from the ledgers under <code>refs/leases/</code>.</footer>\n<script>\n");
    page.push_str(SCRIPT);
    page.push_str("</script>\n</body>\n</html>\n");
}

const STYLE: &str = r#":root{--label:11rem;--row:30px;--bg:#f7f8fa;--fg:#1f2328;--muted:#656d76;--line:#d8dee4;--card:#fff;
--live:#2563eb;--completed:#1a7f37;--released:#57606a;--abandoned:#bf8700;--revoked:#cf222e;--expired:#afb8c1;--taken_over:#8250df}
*{box-sizing:border-box}
body{margin:0;padding:24px 28px 40px;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
h1{font-size:22px;margin:0 0 2px}
.window{margin:0 0 16px;color:var(--muted)}
.summary{display:flex;flex-wrap:wrap;gap:12px;margin-bottom:16px}
.stat{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 16px;min-width:140px}
.stat b{display:block;font-size:24px;line-height:1.2;font-variant-numeric:tabular-nums}
.stat span{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
#stat-live b{color:var(--live)}
.tools{display:flex;flex-wrap:wrap;align-items:center;justify-content:space-between;gap:12px;margin-bottom:10px}
.legend{display:flex;flex-wrap:wrap;gap:14px;list-style:none;margin:0;padding:0;color:var(--muted);font-size:13px}
.legend li{display:flex;align-items:center;gap:6px}
.legend small{color:#8c959f}
.swatch{display:inline-block;width:22px;height:11px;border-radius:3px}
.renewal-swatch{width:3px;height:13px;background:#fff;box-shadow:0 0 0 1px #57606a}
#filter{font:inherit;padding:6px 10px;border:1px solid var(--line);border-radius:6px;min-width:16rem;background:var(--card)}
.note{background:#fff8c5;border:1px solid #d4a72c66;border-radius:6px;padding:8px 12px;margin:0 0 10px}
.chart{background:var(--card);border:1px solid var(--line);border-radius:8px;overflow:hidden}
.axis{display:flex;position:sticky;top:0;z-index:3;background:var(--card);border-bottom:1px solid var(--line);height:32px}
.corner{width:var(--label);flex:none;padding:7px 12px;color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em;border-right:1px solid var(--line)}
.scale{position:relative;flex:1;margin-right:56px}
.tick,.now-label{position:absolute;top:8px;transform:translateX(-50%);white-space:nowrap;font-size:12px;color:var(--muted);font-variant-numeric:tabular-nums}
.tick.edge-start{transform:none}
.tick.edge-end{transform:translateX(-100%)}
.now-label{top:auto;bottom:-1px;background:var(--live);color:#fff;border-radius:4px 4px 0 0;padding:0 6px;font-size:11px;font-weight:600}
.rows{position:relative}
.grid{position:absolute;top:0;bottom:0;left:var(--label);right:56px;pointer-events:none}
.grid i{position:absolute;top:0;bottom:0;border-left:1px dashed #e3e7eb}
.grid .now-line{border-left:2px solid var(--live);opacity:.55}
.row{display:flex;height:var(--row);border-bottom:1px solid #eef1f4;content-visibility:auto;contain-intrinsic-size:auto var(--row)}
.row[hidden]{display:none}
.row:last-child{border-bottom:0}
.row:hover{background:#f6f8fa}
.issue{width:var(--label);flex:none;padding:0 12px;line-height:var(--row);font-weight:600;font-variant-numeric:tabular-nums;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;border-right:1px solid var(--line)}
.track{position:relative;flex:1;margin-right:56px}
.bar{position:absolute;top:5px;height:calc(var(--row) - 10px);min-width:3px;border-radius:4px;color:#fff;font-size:12px;line-height:calc(var(--row) - 10px);padding:0 6px;white-space:nowrap;cursor:default;outline-offset:2px;box-shadow:inset 0 -1px 0 #0002}
.bar-label{display:block;overflow:hidden;text-overflow:ellipsis}
.bar small{opacity:.8}
.bar:focus-visible{outline:2px solid var(--fg)}
.bar:hover{filter:brightness(1.08)}
.ending-live{background:var(--live)}
.bar.ending-live{border-radius:4px 0 0 4px;background:linear-gradient(90deg,var(--live) 85%,#60a5fa)}
.ending-completed{background:var(--completed)}
.ending-released{background:var(--released)}
.ending-abandoned{background:var(--abandoned)}
.ending-revoked{background:var(--revoked)}
.ending-expired{background:repeating-linear-gradient(135deg,#c9d1d9 0 6px,#afb8c1 6px 12px);color:#24292f}
.bar.ending-expired{box-shadow:inset 0 0 0 1px #8c959f}
.ending-taken_over{background:var(--taken_over)}
.renewal{position:absolute;top:-2px;bottom:-2px;width:2px;margin-left:-1px;background:#fff;box-shadow:0 0 0 1px #0004;border-radius:1px}
.live-marker{position:absolute;left:100%;top:50%;transform:translateY(-50%);margin-left:4px;background:var(--live);color:#fff;font-size:10px;font-weight:700;line-height:16px;padding:0 5px;border-radius:8px;text-transform:uppercase;letter-spacing:.05em}
.live-marker::before{content:"";display:inline-block;width:6px;height:6px;border-radius:50%;background:#fff;margin-right:4px;vertical-align:1px;animation:pulse 1.6s ease-in-out infinite}
@keyframes pulse{50%{opacity:.3}}
@media (prefers-reduced-motion:reduce){.live-marker::before{animation:none}}
.tip{display:none}
.tooltip{position:absolute;top:0;left:0;z-index:10;max-width:30rem;background:#fff;color:var(--fg);border:1px solid var(--line);border-radius:8px;box-shadow:0 8px 24px #8c959f33;padding:10px 12px;font-size:12.5px;pointer-events:none}
.tooltip .tip-title{margin:0 0 6px;font-weight:600}
.tip-ending{color:#fff;padding:0 6px;border-radius:4px}
.tooltip dl{display:grid;grid-template-columns:auto 1fr;gap:2px 10px;margin:0}
.tooltip dt{color:var(--muted)}
.tooltip dd{margin:0;white-space:pre-wrap;overflow-wrap:anywhere}
.tooltip code{font:11.5px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.empty{padding:24px;color:var(--muted);text-align:center;margin:0}
footer{margin-top:14px;color:var(--muted);font-size:12px}
"#;

/// The page's one script: the tooltip of the bar under the pointer or in focus (its hidden
/// details, cloned as nodes: text stays text), and the filter. Nothing is fetched.
const SCRIPT: &str = r#"(function(){
var tip=document.getElementById('tooltip');
function show(bar){var d=bar.querySelector('.tip');if(!d)return;tip.replaceChildren.apply(tip,Array.prototype.map.call(d.childNodes,function(n){return n.cloneNode(true)}));tip.hidden=false;
var r=bar.getBoundingClientRect(),w=tip.offsetWidth,h=tip.offsetHeight,x=bar.dataset.tipSide==='left'?r.right-w:r.left,y=r.bottom+scrollY+6;
if(y+h>document.documentElement.scrollHeight-4)y=Math.max(4,r.top+scrollY-h-6);tip.style.left=Math.max(4,Math.min(x,document.documentElement.clientWidth-w-4))+scrollX+'px';tip.style.top=y+'px'}
function hide(){tip.hidden=true}
var rows=document.getElementById('rows');
rows.addEventListener('mouseover',function(e){var b=e.target.closest('.bar');if(b)show(b)});
rows.addEventListener('mouseout',function(e){var b=e.target.closest('.bar');if(b&&!b.contains(e.relatedTarget))hide()});
rows.addEventListener('focusin',function(e){var b=e.target.closest('.bar');if(b)show(b)});
rows.addEventListener('focusout',hide);
addEventListener('wheel',hide,{passive:true});
var h=document.getElementById(decodeURIComponent(location.hash.slice(1)));
if(h&&h.classList.contains('bar'))h.focus();
var f=document.getElementById('filter');
f.addEventListener('input',function(){var q=f.value.trim().toLowerCase();
document.querySelectorAll('.row').forEach(function(r){r.hidden=q!==''&&(r.dataset.issue+' '+r.dataset.holders).toLowerCase().indexOf(q)<0})});
})();
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_text_stays_text() {
        assert_eq!(
            escaped("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(
            escaped("alice@example.com 日本 🦀"),
            "alice@example.com 日本 🦀"
        );
        // What a terminal would hide is shown here too: no holder looks like another.
        assert_eq!(escaped("bob\u{202e}moc"), "bob\\u{202e}moc");
        assert_eq!(escaped("a\nb"), "a\\nb");
    }
}
