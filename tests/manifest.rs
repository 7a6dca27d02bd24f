//! The plugin manifest: herdr runs exactly these commands, so each must
//! name a subcommand the binary accepts.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_cowbell");

fn manifest() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/herdr-plugin.toml"))
        .expect("herdr-plugin.toml at the repository root")
}

/// Every `command = [...]` array of the manifest, as its strings.
fn commands(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("command"))
        .filter_map(|rest| rest.trim_start().strip_prefix('='))
        .map(|array| {
            let inner = array.trim().trim_start_matches('[').trim_end_matches(']');
            inner
                .split(',')
                .map(|part| part.trim().trim_matches('"').to_string())
                .collect()
        })
        .collect()
}

#[test]
fn every_command_names_a_subcommand_the_cli_accepts() {
    let text = manifest();
    let commands = commands(&text);
    let ours: Vec<&Vec<String>> = commands.iter().filter(|c| c[0] == "bin/cowbell").collect();
    assert!(ours.len() >= 6, "{commands:?}");
    for command in ours {
        // `--help` after the manifest's own arguments: the parse must accept
        // them all before it reaches the help flag.
        let output = Command::new(BIN)
            .args(&command[1..])
            .arg("--help")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{command:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            String::from_utf8_lossy(&output.stdout).starts_with("Usage: cowbell"),
            "{command:?}"
        );
    }
    // And a command the CLI does not know is refused, so the check can fail.
    let output = Command::new(BIN)
        .args(["dance", "--help"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn the_manifest_wires_the_hooks_and_actions_of_the_specification() {
    let text = manifest();
    for needle in [
        "id = \"cowbell\"",
        // herdr shows the manifest's version; `--version` shows Cargo's.
        &format!("version = \"{}\"", env!("CARGO_PKG_VERSION")),
        "min_herdr_version = \"0.8.0\"",
        "platforms = [\"linux\", \"macos\"]",
        "command = [\"sh\", \"build.sh\"]",
        "command = [\"bin/cowbell\", \"daemon\", \"--replace\"]",
        "on = \"pane.agent_detected\"",
        "command = [\"bin/cowbell\", \"watchdog\"]",
        "title = \"Cowbell: on\"",
        "title = \"Cowbell: off\"",
        "title = \"Cowbell: remove icons\"",
        "title = \"Cowbell: status\"",
    ] {
        assert!(text.contains(needle), "manifest lacks {needle}");
    }
    for id in ["on", "off", "remove-icons", "status"] {
        assert!(text.contains(&format!("id = \"{id}\"")), "action {id}");
        assert!(
            text.contains(&format!("command = [\"bin/cowbell\", \"{id}\"]")),
            "action {id}"
        );
    }
}

#[test]
fn help_and_version_behave_as_users_expect() {
    let output = Command::new(BIN).arg("--version").output().unwrap();
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("cowbell {}\n", env!("CARGO_PKG_VERSION"))
    );
    let output = Command::new(BIN).arg("--help").output().unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("Exit codes:"));
    let output = Command::new(BIN).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).starts_with("cowbell: "));
}

#[test]
fn a_reader_that_went_away_is_no_panic() {
    // `cowbell presets | head -1`: the pipe is closed before cowbell writes.
    for args in [
        &["presets"][..],
        &["--help"],
        &["--version"],
        &["config", "check"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = Command::new(BIN)
            .args(args)
            .env("HERDR_PLUGIN_CONFIG_DIR", "/nonexistent/cowbell-config")
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
