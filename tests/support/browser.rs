//! Headless Chromium driven through chromedriver and fantoccini
//! (`docs/architecture.md#build-notes`): chromedriver runs as a child on a free port, in a process
//! group of its own with the Chromium it starts, and the whole group is killed when the [`Browser`]
//! drops (a test that panics leaves no browser behind); each browser gets a fresh profile
//! directory.
//! Screenshots go to `$CARGO_TARGET_DIR/screenshots` (default
//! `target/screenshots`).

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};

/// chromedriver from Debian's `chromium-driver`.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Chromium from Debian's `chromium`.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// A WebDriver session on a headless Chromium.
pub struct Browser {
    /// The WebDriver client.
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Browser {
    /// Starts chromedriver and a headless Chromium (1280×900).
    pub async fn start() -> Browser {
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own group, inherited by Chromium and its helpers: killing
            // chromedriver alone would orphan them.
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {CHROMEDRIVER} (apt-get install chromium-driver): {e}")
            });
        let deadline = Instant::now() + Duration::from_secs(15);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not listen on {port}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = tempfile::tempdir().expect("profile dir");
        let caps = serde_json::json!({
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--no-first-run", "--window-size=1280,900",
                    "--hide-scrollbars",
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }
        });
        let caps = match caps {
            serde_json::Value::Object(map) => map,
            _ => unreachable!(),
        };
        let mut driver = driver;
        let client =
            match ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
                .capabilities(caps)
                .connect(&format!("http://127.0.0.1:{port}"))
                .await
            {
                Ok(client) => client,
                Err(e) => {
                    kill_group(&mut driver);
                    panic!("WebDriver session: {e}");
                }
            };
        Browser {
            client,
            driver,
            _profile: profile,
        }
    }

    /// Opens `url`.
    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("goto");
    }

    /// Runs `op` on the first element matching `css`. Live pages swap their
    /// content every few seconds, so an element found may be replaced before
    /// `op` lands: a stale element is looked up again (up to 5 times).
    async fn on_element<T, F, Fut>(&self, css: &str, what: &str, op: F) -> T
    where
        F: Fn(fantoccini::elements::Element) -> Fut,
        Fut: std::future::Future<Output = Result<T, fantoccini::error::CmdError>>,
    {
        let mut attempt = 1;
        loop {
            let element = self
                .client
                .wait()
                .at_most(Duration::from_secs(10))
                .for_element(Locator::Css(css))
                .await
                .unwrap_or_else(|e| panic!("no element {css}: {e}"));
            match op(element).await {
                Ok(out) => return out,
                Err(e) if attempt < 5 && is_stale(&e) => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("{what} {css}: {e}"),
            }
        }
    }

    /// The text of the first element matching `css`.
    pub async fn text(&self, css: &str) -> String {
        self.on_element(css, "text of", |e| async move { e.text().await })
            .await
    }

    /// Clicks the first element matching `css`.
    pub async fn click(&self, css: &str) {
        self.on_element(css, "click", |e| async move { e.click().await })
            .await
    }

    /// Types `text` into the first element matching `css`.
    pub async fn type_into(&self, css: &str, text: &str) {
        self.on_element(css, "type into", |e| async move { e.send_keys(text).await })
            .await
    }

    /// Chooses the option `value` of the select element matching `css`.
    pub async fn select(&self, css: &str, value: &str) {
        self.on_element(css, "select in", |e| async move {
            e.select_by_value(value).await
        })
        .await
    }

    /// The texts of every element matching `css`, in page order.
    pub async fn texts(&self, css: &str) -> Vec<String> {
        let elements = self
            .client
            .find_all(Locator::Css(css))
            .await
            .unwrap_or_default();
        let mut texts = Vec::with_capacity(elements.len());
        for e in elements {
            texts.push(e.text().await.unwrap_or_default());
        }
        texts
    }

    /// How many elements match `css`.
    pub async fn count(&self, css: &str) -> usize {
        self.client
            .find_all(Locator::Css(css))
            .await
            .map(|v| v.len())
            .unwrap_or(0)
    }

    /// The current URL.
    pub async fn url(&self) -> String {
        self.client.current_url().await.expect("url").to_string()
    }

    /// Waits until the page at `path` (a URL suffix) has loaded.
    pub async fn wait_for_path(&self, path: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let url = self.url().await;
            if url.contains(path) {
                return;
            }
            assert!(Instant::now() < deadline, "still at {url}, expected {path}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the text of `css` contains `needle` (live updates).
    pub async fn wait_for_text(&self, css: &str, needle: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let text = match self.client.find(Locator::Css(css)).await {
                Ok(e) => e.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            if text.contains(needle) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "{css} never contained {needle:?}; last: {text:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Saves a screenshot of the viewport as `<screenshots>/<name>.png`.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        self.save_screenshot(screenshot_dir(), name).await
    }

    /// Saves a screenshot of the viewport for the README: as
    /// `tests/screenshots/<name>.png` in the repository (committed) when
    /// `UPDATE_SCREENSHOTS=1` is set, else with the others in
    /// `<screenshots>/` — so a test run never changes the checkout.
    pub async fn screenshot_committed(&self, name: &str) -> PathBuf {
        let dir = if std::env::var_os("UPDATE_SCREENSHOTS").is_some_and(|v| v == "1") {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/screenshots")
        } else {
            screenshot_dir()
        };
        self.save_screenshot(dir, name).await
    }

    async fn save_screenshot(&self, dir: PathBuf, name: &str) -> PathBuf {
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        let png = self.client.screenshot().await.expect("screenshot");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("write screenshot");
        path
    }

    /// Ends the session (the child is killed on drop either way).
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        kill_group(&mut self.driver);
    }
}

/// SIGKILLs the process group `driver` leads (chromedriver, Chromium and
/// Chromium's helpers) and reaps `driver`.
fn kill_group(driver: &mut Child) {
    if let Ok(pgid) = i32::try_from(driver.id()) {
        // SAFETY: kill(2) on the group of our own child, which wait() has
        // not reaped yet, so its ID still names that group.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
    let _ = driver.kill();
    let _ = driver.wait();
}

/// Where screenshots go.
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("screenshots")
}

/// A WebDriver error saying the element left the page (a live swap).
fn is_stale(e: &fantoccini::error::CmdError) -> bool {
    matches!(
        e,
        fantoccini::error::CmdError::Standard(w)
            if w.error == fantoccini::error::ErrorStatus::StaleElementReference
    )
}
