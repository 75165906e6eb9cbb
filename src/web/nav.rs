//! The dashboard's navigation: the one list of its sections, shown by every
//! page (`templates/base.html`) and by the HTML error page
//! (`templates/error.html`, a 404 included), so that a section added here
//! is in both.

/// One section of the dashboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section {
    /// The page key a page's chrome names to mark its entry active.
    pub key: &'static str,
    /// Where it links.
    pub href: &'static str,
    /// Its label.
    pub label: &'static str,
}

const fn section(key: &'static str, href: &'static str, label: &'static str) -> Section {
    Section { key, href, label }
}

/// The sections, in the order shown.
pub const SECTIONS: &[Section] = &[
    section("overview", "/", "Overview"),
    section("tasks", "/tasks", "Tasks"),
    section("services", "/services", "Services"),
    section("jobs", "/jobs", "Jobs"),
    section("offers", "/offers", "Offers"),
    section("agents", "/agents", "Agents"),
    section("replicas", "/replicas", "Replicas"),
    section("events", "/events", "Events"),
    section("actions", "/actions", "Actions"),
    section("audit", "/audit", "Audit"),
];
