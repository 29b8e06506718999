//! A run's settings from the command line, laid over a config's TOML (or
//! over nothing): a scan file, and `section.key=value` pairs for any key
//! of the config (the binary's flags such as `--lambda` are such pairs).
//! The config becomes an optional protocol file whose values the command
//! line overrides, as BART's and Gadgetron's options do.

use crate::{bail, Context, Result};
use std::path::PathBuf;

/// What the command line sets. Empty: the config alone.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// The scan file (`scan.file`), relative to the current folder.
    pub scan: Option<PathBuf>,
    /// `section.key=value` pairs, in order (a later one wins); the value is
    /// TOML (`0.1`, `true`, `[1, 2]`, `"text"`), or else taken as a string.
    pub set: Vec<String>,
}

impl Settings {
    pub fn is_empty(&self) -> bool {
        self.scan.is_none() && self.set.is_empty()
    }

    /// The config `text` (TOML, possibly empty) with these settings laid
    /// over it, as TOML.
    pub fn compose(&self, text: &str) -> Result<String> {
        let mut table: toml::Table = text.parse().context("the config is not valid TOML")?;
        if let Some(scan) = &self.scan {
            let file = std::path::absolute(scan)
                .with_context(|| format!("the scan file {}", scan.display()))?;
            let value = toml::Value::String(file.display().to_string());
            insert(&mut table, "scan.file", value).context("the scan file")?;
        }
        for pair in &self.set {
            let Some((key, value)) = pair.split_once('=') else {
                bail!("--set {pair:?}: expected section.key=value (for example solver.lambda=0.1)");
            };
            let (key, value) = (key.trim(), value.trim());
            insert(&mut table, key, parse_value(value))
                .with_context(|| format!("--set {pair:?}"))?;
        }
        toml::to_string(&table).context("writing the settings as TOML")
    }
}

/// A command-line value as TOML (`0.1`, `true`, `[1, 2]`, `"x"`), else as a
/// string (`cuda`, a path).
fn parse_value(value: &str) -> toml::Value {
    match format!("v = {value}").parse::<toml::Table>() {
        Ok(mut t) => t.remove("v").expect("the key just written"),
        Err(_) => toml::Value::String(value.to_string()),
    }
}

/// Sets `key` (dotted: `section.key`, `section.sub.key`) in `table`,
/// making the tables on its way.
fn insert(table: &mut toml::Table, key: &str, value: toml::Value) -> Result<()> {
    let parts: Vec<&str> = key.split('.').collect();
    if parts.len() < 2 || parts.iter().any(|p| p.is_empty()) {
        bail!("`{key}` is not a config key: name its section too (for example solver.lambda)");
    }
    let (last, path) = parts.split_last().expect("two parts or more");
    let mut t = table;
    for (i, p) in path.iter().enumerate() {
        let entry = t
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = match entry {
            toml::Value::Table(sub) => sub,
            _ => bail!("`{}` is a value, not a section", parts[..=i].join(".")),
        };
    }
    t.insert(last.to_string(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn composed(text: &str, set: &[&str]) -> Result<toml::Table> {
        let s = Settings {
            scan: None,
            set: set.iter().map(|s| s.to_string()).collect(),
        };
        Ok(s.compose(text)?.parse().unwrap())
    }

    #[test]
    fn settings_override_the_config_and_make_its_sections() {
        let t = composed(
            "[solver]\nlambda = 1.0\niterations = 5\n",
            &[
                "solver.lambda=0.1",
                "engine.device=cuda",
                "scan.slices=[0, 2]",
                "output.dir=out dir",
            ],
        )
        .unwrap();
        assert_eq!(t["solver"]["lambda"].as_float(), Some(0.1));
        assert_eq!(t["solver"]["iterations"].as_integer(), Some(5));
        assert_eq!(t["engine"]["device"].as_str(), Some("cuda"));
        assert_eq!(t["scan"]["slices"].as_array().unwrap().len(), 2);
        assert_eq!(t["output"]["dir"].as_str(), Some("out dir"));
        // A later pair wins.
        let t = composed("", &["solver.lambda=1", "solver.lambda=2"]).unwrap();
        assert_eq!(t["solver"]["lambda"].as_integer(), Some(2));
    }

    #[test]
    fn malformed_settings_are_refused_naming_them() {
        for (set, want) in [
            ("lambda", "section.key=value"),
            ("lambda=1", "name its section"),
            ("solver..lambda=1", "not a config key"),
            ("solver.lambda.x=1", "is a value"),
        ] {
            let e = composed("[solver]\nlambda = 1\n", &[set]).unwrap_err();
            let mut e: (String, Option<&dyn std::error::Error>) = (e.to_string(), Some(&e));
            // The message and its causes.
            while let Some(cause) = e.1.and_then(|c| c.source()) {
                e = (format!("{}: {cause}", e.0), Some(cause));
            }
            let e = e.0;
            assert!(
                e.contains(want) && e.contains(set.split('=').next().unwrap()),
                "{set}: {e}"
            );
        }
        assert!(composed("[solver\n", &["solver.lambda=1"]).is_err());
    }

    #[test]
    fn paths_are_normalised_as_printed() {
        use crate::config::normalise;
        use std::path::Path;
        for (p, want) in [
            ("configs/../x.h5", "x.h5"),
            ("./a/./b", "a/b"),
            ("/x/../../y", "/y"),
            ("../a/../../b", "../../b"),
            ("a/..", "."),
        ] {
            assert_eq!(normalise(Path::new(p)), Path::new(want), "{p}");
        }
    }
}
