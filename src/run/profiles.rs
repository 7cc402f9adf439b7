//! [`Profiles`]: which profiles a run uses. The selection is resolved into a
//! [`Policy`](crate::policy::Policy) only when the run starts, because a policy's variables
//! depend on the run: `{tmp}` is the run's private temporary directory, named after its id.

use std::fmt;
use std::path::PathBuf;

use crate::policy::{self, Policy, PolicyError, Vars};

/// The profile a run uses when none is named.
pub const DEFAULT_PROFILE: &str = "agent";

/// A resolver given by the embedding program.
type Resolver = Box<dyn FnOnce(&Vars) -> Result<Policy, PolicyError> + Send>;

/// Which profiles a run uses: built-in names or TOML files, layered in order (each may
/// `extends` another), or a resolver of the embedding program's own.
pub struct Profiles {
    source: Source,
}

enum Source {
    Specs(Vec<String>),
    Resolver(Resolver),
}

impl Profiles {
    /// Profiles by built-in name (`agent`, `ci`, `strict`, ...) or file path, layered in the
    /// order given; none means [`DEFAULT_PROFILE`].
    pub fn new<I, S>(specs: I) -> Profiles
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Profiles {
            source: Source::Specs(specs.into_iter().map(Into::into).collect()),
        }
    }

    /// A policy built by `resolve` from the run's variables (`{workspace}`, `{home}`, `{tmp}`,
    /// `{state}`), for programs that assemble or adjust policies themselves, e.g.
    /// `Profiles::resolve_with(|vars| guard::policy::load(&["ci".into()], vars))`. A policy
    /// resolved beforehand can be returned as it is; the run's private temporary directory is
    /// then writable only if its write roots include it.
    pub fn resolve_with<F>(resolve: F) -> Profiles
    where
        F: FnOnce(&Vars) -> Result<Policy, PolicyError> + Send + 'static,
    {
        Profiles {
            source: Source::Resolver(Box::new(resolve)),
        }
    }

    /// The selection in words, for the record of a run (`agent`, `agent,./extra.toml`).
    pub(crate) fn describe(&self) -> String {
        match &self.source {
            Source::Specs(specs) if specs.is_empty() => DEFAULT_PROFILE.to_string(),
            Source::Specs(specs) => specs.join(","),
            Source::Resolver(_) => "(resolved by the embedding program)".to_string(),
        }
    }

    /// Resolve the selection with the run's variables, layered over the configuration files
    /// `config` that were found without a flag (see
    /// [`policy::load_layers`](crate::policy::load_layers)). A resolver of the embedding
    /// program gets no configuration files.
    pub(crate) fn resolve(self, vars: &Vars, config: &[PathBuf]) -> Result<Policy, PolicyError> {
        match self.source {
            Source::Specs(specs) => policy::load_layers(&specs, config, vars),
            Source::Resolver(resolve) => resolve(vars),
        }
    }
}

impl Default for Profiles {
    /// The [`DEFAULT_PROFILE`].
    fn default() -> Self {
        Profiles::new([DEFAULT_PROFILE])
    }
}

impl From<&str> for Profiles {
    fn from(spec: &str) -> Self {
        Profiles::new([spec])
    }
}

impl From<String> for Profiles {
    fn from(spec: String) -> Self {
        Profiles::new([spec])
    }
}

impl From<Vec<String>> for Profiles {
    fn from(specs: Vec<String>) -> Self {
        Profiles::new(specs)
    }
}

impl<const N: usize> From<[&str; N]> for Profiles {
    fn from(specs: [&str; N]) -> Self {
        Profiles::new(specs)
    }
}

impl fmt::Debug for Profiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Source::Specs(specs) => f.debug_tuple("Profiles").field(specs).finish(),
            Source::Resolver(_) => f.write_str("Profiles(<resolver>)"),
        }
    }
}
