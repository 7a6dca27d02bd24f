//! `cowbell config check` and `cowbell presets` as a user runs them.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_cowbell");

fn check(config: Option<&str>) -> std::process::Output {
    let dir = std::env::temp_dir().join(format!(
        "cowbell-check-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    if let Some(text) = config {
        std::fs::write(dir.join("config.json"), text).unwrap();
    }
    let output = Command::new(BIN)
        .args(["config", "check"])
        .env("HERDR_PLUGIN_CONFIG_DIR", &dir)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    output
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::SeqCst)
}

#[test]
fn a_missing_file_means_defaults() {
    let output = check(None);
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("\"preset\": \"emoji\"") || stdout.contains("\"preset\":\"emoji\""),
        "{stdout}"
    );
    assert!(stdout.ends_with("}\n"), "{stdout:?}");
}

#[test]
fn errors_name_the_file_the_key_and_what_is_allowed_and_exit_1() {
    let output = check(Some(r#"{"preset": "rainbow", "spinner_interval_ms": 100}"#));
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("config.json")
            && stderr.contains("\"preset\"")
            && stderr.contains("rainbow"),
        "{stderr}"
    );
    assert!(stderr.contains("from 250 to 60000"), "{stderr}");
}

#[test]
fn broken_json_is_located_by_line_and_column() {
    let output = check(Some("{\n  \"spinner\": true\n  \"preset\": \"ascii\"\n}"));
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("line 3, column 3"), "{stderr}");
}

#[test]
fn an_unknown_key_is_a_warning_and_the_rest_applies() {
    let output = check(Some(r#"{"spiner": true, "preset": "ascii"}"#));
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("spiner") && stderr.contains("valid keys"),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("ascii"));
}

#[test]
fn presets_shows_every_preset_as_a_tab_bar() {
    let output = Command::new(BIN).arg("presets").output().unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    for name in ["emoji", "symbols", "ascii", "nerd", "attention"] {
        assert!(stdout.contains(name), "{name} missing:\n{stdout}");
    }
    assert!(stdout.contains("🔴 "));
}

#[test]
fn an_empty_variable_counts_as_unset() {
    // HERDR_PLUGIN_CONFIG_DIR="" names no directory (it would be the
    // working directory): the XDG fallback applies.
    let xdg = std::env::temp_dir().join(format!("cowbell-check-xdg-{}", std::process::id()));
    let dir = xdg.join("herdr/plugins/config/cowbell");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), r#"{"preset": "ascii"}"#).unwrap();
    let output = Command::new(BIN)
        .args(["config", "check"])
        .env("HERDR_PLUGIN_CONFIG_DIR", "")
        .env("XDG_CONFIG_HOME", &xdg)
        .current_dir(&xdg)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&xdg);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("\"preset\": \"ascii\""), "{stdout}");
}
