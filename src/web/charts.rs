//! The overview's charts: server-rendered SVG from a [`HistoryView`], so
//! they need no script and nothing from the internet. Three line charts
//! (running, staging/starting, failed tasks; one line per service) and a
//! bar chart of offers received and declined per minute share one time
//! axis, with the [marks](super::history::Mark) — leadership changes,
//! subscriptions, master changes, reconciliations, partitions, drains,
//! maintenance windows and job runs — drawn across each as dashed lines, one colour per
//! kind (hover one for what happened). Every text that comes from
//! data is XML-escaped.
//!
//! The charts sit in the overview's live part, so `app.js` re-renders them
//! on each snapshot announced by the event stream.

use std::fmt::Write;

use super::history::{HistoryView, Window};

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 130.0;
const LEFT: f64 = 40.0;
const RIGHT: f64 = 10.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 22.0;

/// Line colours, one per service in turn (`static/app.css` has them as
/// `.sw-0` … `.sw-9` for the legend: the CSP allows no inline style).
const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// The colour of a mark of `kind`.
pub fn mark_colour(kind: &str) -> &'static str {
    match kind {
        "leadership" => "#b35c00",
        "subscribed" => "#2e7d32",
        "master" => "#6a1b9a",
        "partition" => "#c62828",
        "drain" => "#00838f",
        "maintenance" => "#8d6e63",
        "job" => "#5d4037",
        _ => "#1565c0",
    }
}

/// The kinds of [marks](super::history::Mark), in the legend's order.
pub const MARK_KINDS: &[&str] = &[
    "leadership",
    "subscribed",
    "master",
    "reconcile",
    "partition",
    "drain",
    "maintenance",
    "job",
];

/// One chart, ready for the template.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Element ID (`chart-running`, …).
    pub id: &'static str,
    /// Heading.
    pub title: &'static str,
    /// The `<svg>` element, escaped.
    pub svg: String,
}

/// Everything the overview's charts section shows.
#[derive(Debug, Clone)]
pub struct Charts {
    /// The window shown.
    pub window: Window,
    /// The charts.
    pub charts: Vec<Chart>,
    /// Services and their colour's index in the palette (CSS `sw-<i>`).
    pub legend: Vec<(String, usize)>,
    /// Mark kinds (CSS `mk-<kind>`).
    pub mark_legend: &'static [&'static str],
    /// Marks in the window, newest first (for the list under the charts).
    pub marks: Vec<super::history::Mark>,
    /// Whose ring it is.
    pub source: String,
    /// Samples in the window.
    pub points: usize,
    /// Why the leader's history could not be shown, if so.
    pub note: Option<String>,
}

/// XML-escapes `text`.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

struct Frame {
    from: f64,
    to: f64,
    max: f64,
}

impl Frame {
    fn x(&self, at: f64) -> f64 {
        let span = (self.to - self.from).max(1.0);
        LEFT + (at - self.from).clamp(0.0, span) / span * (WIDTH - LEFT - RIGHT)
    }

    fn y(&self, v: f64) -> f64 {
        TOP + (HEIGHT - TOP - BOTTOM) * (1.0 - v / self.max.max(1.0))
    }
}

/// A "nice" top of the y axis at or above `max`.
fn nice_max(max: f64) -> f64 {
    if max <= 4.0 {
        return max.max(1.0).ceil();
    }
    let magnitude = 10f64.powf(max.log10().floor());
    for step in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if step * magnitude >= max {
            return step * magnitude;
        }
    }
    max
}

/// Axes, grid, time labels and marks.
fn frame_svg(out: &mut String, f: &Frame, view: &HistoryView, label: &str) {
    let _ = write!(
        out,
        r#"<svg viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{}">"#,
        esc(label)
    );
    let bottom = HEIGHT - BOTTOM;
    for frac in [0.0, 0.5, 1.0] {
        let v = f.max * frac;
        let y = f.y(v);
        let _ = write!(
            out,
            r#"<line class="grid" x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            WIDTH - RIGHT,
            LEFT - 4.0,
            y + 4.0,
            if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        );
    }
    let _ = write!(
        out,
        r#"<line class="axis" x1="{LEFT}" y1="{bottom}" x2="{:.1}" y2="{bottom}"/>"#,
        WIDTH - RIGHT
    );
    let ticks = 6;
    for i in 0..=ticks {
        let at = f.from + (f.to - f.from) * i as f64 / ticks as f64;
        let anchor = match i {
            0 => "start",
            i if i == ticks => "end",
            _ => "middle",
        };
        let clock = crate::util::format_time(at);
        // Minutes, or seconds too for spans under 10 minutes.
        let end = if f.to - f.from < 600.0 { 19 } else { 16 };
        let hhmm = clock.get(11..end).unwrap_or(&clock);
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
            f.x(at),
            HEIGHT - 6.0,
            esc(hhmm)
        );
    }
    for m in &view.marks {
        let x = f.x(m.at);
        let _ = write!(
            out,
            r#"<line class="mark mark-{}" x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{bottom}" stroke="{}"><title>{} — {}: {}</title></line>"#,
            esc(&m.kind),
            mark_colour(&m.kind),
            esc(&crate::util::format_time(m.at)),
            esc(&m.kind),
            esc(&m.text)
        );
    }
}

/// The frame of a chart whose values reach `max`, and its SVG so far.
fn start(view: &HistoryView, max: Option<u32>, label: &str) -> (Frame, String) {
    let f = Frame {
        from: view.from,
        to: view.to,
        max: nice_max(f64::from(max.unwrap_or(0))),
    };
    let mut out = String::new();
    frame_svg(&mut out, &f, view, label);
    (f, out)
}

fn lines_chart(view: &HistoryView, series: &[Vec<u32>], label: &str) -> String {
    let max = series.iter().flat_map(|s| s.iter().copied()).max();
    let (f, mut out) = start(view, max, label);
    for (i, values) in series.iter().enumerate() {
        if values.iter().all(|v| *v == 0) {
            continue;
        }
        let mut points = String::new();
        for (at, v) in view.times.iter().zip(values) {
            let _ = write!(points, "{:.1},{:.1} ", f.x(*at), f.y(f64::from(*v)));
        }
        let name = view.services.get(i).map_or("", String::as_str);
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.8" points="{}"><title>{}</title></polyline>"#,
            PALETTE[i % PALETTE.len()],
            points.trim_end(),
            esc(name)
        );
    }
    out.push_str("</svg>");
    out
}

fn offers_chart(view: &HistoryView) -> String {
    let max = view.offers.iter().map(|o| o.received.max(o.declined)).max();
    let (f, mut out) = start(view, max, "offers received and declined per minute");
    let minute = (f.x(view.from + 60.0) - f.x(view.from)).max(1.0);
    let bar = (minute / 2.0 - 0.5).max(0.5);
    let base = f.y(0.0);
    for o in &view.offers {
        if o.at + 60.0 < view.from || o.at > view.to {
            continue;
        }
        for (k, (n, colour, what)) in [
            (o.received, "#1f77b4", "received"),
            (o.declined, "#9aa3ad", "declined"),
        ]
        .into_iter()
        .enumerate()
        {
            if n == 0 {
                continue;
            }
            let x = f.x(o.at) + k as f64 * bar;
            let y = f.y(f64::from(n));
            let _ = write!(
                out,
                r#"<rect class="offers-{what}" x="{x:.1}" y="{y:.1}" width="{bar:.1}" height="{:.1}" fill="{colour}"><title>{}: {n} {what}</title></rect>"#,
                (base - y).max(0.5),
                esc(&crate::util::format_time(o.at))
            );
        }
    }
    out.push_str("</svg>");
    out
}

impl Charts {
    /// The charts of `view` (window `window`), with `note` when the
    /// leader's history could not be read.
    pub fn new(view: &HistoryView, window: Window, note: Option<String>) -> Charts {
        let charts = vec![
            Chart {
                id: "chart-running",
                title: "Running tasks",
                svg: lines_chart(view, &view.running, "running tasks per service"),
            },
            Chart {
                id: "chart-starting",
                title: "Staging and starting tasks",
                svg: lines_chart(
                    view,
                    &view.starting,
                    "staging and starting tasks per service",
                ),
            },
            Chart {
                id: "chart-failed",
                title: "Failed tasks",
                svg: lines_chart(view, &view.failed, "failed task records per service"),
            },
            Chart {
                id: "chart-offers",
                title: "Offers per minute (received, declined)",
                svg: offers_chart(view),
            },
        ];
        let legend = view
            .services
            .iter()
            .enumerate()
            .map(|(i, s)| (s.clone(), i % PALETTE.len()))
            .collect();
        Charts {
            window,
            charts,
            legend,
            mark_legend: MARK_KINDS,
            marks: view.marks.iter().rev().take(12).cloned().collect(),
            source: view.replica.clone(),
            points: view.times.len(),
            note,
        }
    }

    /// `on` for the window shown.
    pub fn on(&self, name: &str) -> &'static str {
        if self.window.name() == name { "on" } else { "" }
    }

    /// The windows to choose from.
    pub fn windows(&self) -> [&'static str; 3] {
        Window::ALL.map(Window::name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::history::{Mark, OfferMinute};

    #[test]
    fn data_is_escaped_and_drawn() {
        let view = HistoryView {
            replica: "http://a".into(),
            window: "15m".into(),
            from: 1000.0,
            to: 1900.0,
            interval_seconds: 5.0,
            times: vec![1000.0, 1450.0, 1900.0],
            services: vec!["web<script>".into()],
            running: vec![vec![1, 3, 2]],
            starting: vec![vec![0, 0, 0]],
            failed: vec![vec![0, 1, 0]],
            offers: vec![OfferMinute {
                at: 1020.0,
                received: 4,
                declined: 3,
            }],
            marks: vec![
                Mark {
                    at: 1500.0,
                    kind: "leadership".into(),
                    text: "<b>leader</b> & co".into(),
                },
                Mark {
                    at: 1600.0,
                    kind: "partition".into(),
                    text: "agent a1 unreachable".into(),
                },
                Mark {
                    at: 1700.0,
                    kind: "drain".into(),
                    text: "agent a1 draining".into(),
                },
            ],
        };
        let charts = Charts::new(&view, Window::Quarter, None);
        let all: String = charts.charts.iter().map(|c| c.svg.as_str()).collect();
        assert!(!all.contains("<script>") && !all.contains("<b>"), "{all}");
        assert!(all.contains("&lt;b&gt;leader&lt;/b&gt; &amp; co"));
        assert!(all.contains("<polyline"));
        assert!(all.contains("offers-received") && all.contains("offers-declined"));
        assert_eq!(all.matches("class=\"mark mark-leadership\"").count(), 4);
        // Partitions and drains: a line of their own colour on each chart.
        assert_eq!(
            all.matches(r##"class="mark mark-partition" x1="##).count(),
            4
        );
        assert_eq!(all.matches(r##"stroke="#c62828""##).count(), 4);
        assert_eq!(all.matches(r##"stroke="#00838f""##).count(), 4);
        assert!(all.contains("agent a1 draining"));
        assert!(charts.mark_legend.contains(&"partition") && charts.mark_legend.contains(&"drain"));
        assert_eq!(nice_max(7.0), 10.0);
        assert_eq!(nice_max(3.0), 3.0);
    }
}
