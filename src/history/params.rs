//! The query parameters of the journal listings as types. Each type parses its own values and
//! describes itself to the OpenAPI document from the same constants, so the document states exactly
//! the rules the server enforces and the two cannot drift:
//!
//! - names and namespaces: Kubernetes' DNS-1123 grammar (`pattern`, `minLength`, `maxLength`);
//! - `outcome`, `reason`, `kind`: closed vocabularies (`enum`);
//! - `since`, `until`: RFC 3339 times (`format: date-time`, checked by the same pattern);
//! - `limit`: an integer from 1 to [`MAX_LIMIT`] (`minimum`, `maximum`, `default`);
//! - `cursor`: opaque, but every value its pattern admits is a valid position.
//!
//! An empty value (`?namespace=`) is refused like any other value outside the rules: it is never
//! read as "no filter" (omit the parameter for that), and the document says so (`minLength`, the
//! patterns). The same parser serves the CLI (`eru-operator history`), which passes its flags
//! through [`parse`].

use std::{fmt, sync::LazyLock};

use chrono::{DateTime, Utc};
use regex::Regex;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use utoipa::{
    IntoParams, PartialSchema, ToSchema,
    openapi::{
        KnownFormat, ObjectBuilder, RefOr, Schema, SchemaFormat, Type,
        schema::{Schema as S, SchemaType},
    },
};

use super::QueryError;
pub use crate::vocab::{Outcome, Reason, SlotResult};

/// Default page size.
pub const DEFAULT_LIMIT: u32 = 100;
/// Largest page size.
pub const MAX_LIMIT: u32 = 1000;

/// Parses a query string (without the `?`) into parameters, or says what is wrong and where.
pub fn parse<T: DeserializeOwned>(query: &str) -> Result<T, QueryError> {
    let pairs = form_urlencoded::parse(query.as_bytes());
    serde_path_to_error::deserialize(serde_urlencoded::Deserializer::new(pairs)).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // serde's own messages for unknown and duplicate fields already name the parameter.
        let named = inner.contains(&format!("field `{path}`"));
        QueryError::Invalid(if path == "." || named {
            inner
        } else {
            format!("{path}: {inner}")
        })
    })
}

/// Builds the query string that [`parse`] reads, from name/value pairs (the CLI's flags).
pub fn query_string<'a>(pairs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        if let Some(value) = value {
            out.append_pair(name, value);
        }
    }
    out.finish()
}

/// Compiles one of the document's patterns (each is anchored with `^...$`).
fn compile(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a valid pattern")
}

fn string_schema(description: &str, pattern: &str, min_length: usize, max_length: usize) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::String))
        .description(Some(description))
        .pattern(Some(pattern))
        .min_length(Some(min_length))
        .max_length(Some(max_length))
        .into()
}

/// A string type checked by an anchored pattern and a length range.
macro_rules! checked_string {
    ($(#[$doc:meta])* $name:ident, $what:literal, $pattern:expr, $max:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
        #[serde(try_from = "String")]
        pub struct $name(pub String);

        impl $name {
            pub const PATTERN: &str = $pattern;
            pub const MAX_LENGTH: usize = $max;
        }

        impl TryFrom<String> for $name {
            type Error = String;
            fn try_from(value: String) -> Result<Self, String> {
                static RE: LazyLock<Regex> = LazyLock::new(|| compile($name::PATTERN));
                if value.is_empty() {
                    Err("must not be empty; omit the parameter to not filter by it".to_string())
                } else if value.len() > $name::MAX_LENGTH || !RE.is_match(&value) {
                    Err(format!(
                        "must be {} ({} characters at most: lowercase letters, digits, '-'{}), got '{}'",
                        $what,
                        $name::MAX_LENGTH,
                        if $name::PATTERN.contains("\\.") { ", '.'" } else { "" },
                        value.escape_debug()
                    ))
                } else {
                    Ok(Self(value))
                }
            }
        }

        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                string_schema($what, $name::PATTERN, 1, $name::MAX_LENGTH)
            }
        }
        impl ToSchema for $name {}
    };
}

checked_string!(
    /// A namespace: a DNS-1123 label.
    Namespace,
    "a Kubernetes namespace (DNS-1123 label)",
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
    63
);

checked_string!(
    /// An object name: a DNS-1123 subdomain.
    ObjectName,
    "a Kubernetes object name (DNS-1123 subdomain)",
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    253
);

checked_string!(
    /// An object's uid, as Kubernetes gives it: a lowercase UUID. An Eru deleted and created again
    /// under its name has another, and its own ledger.
    Uid,
    "an object's uid (a lowercase UUID)",
    "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
    36
);

checked_string!(
    /// A restarted workload as the journal names it: a Deployment's name, or `StatefulSet/<name>`,
    /// `DaemonSet/<name>`.
    TargetName,
    "a Deployment's name, or StatefulSet/<name> or DaemonSet/<name> (a DNS-1123 subdomain)",
    "^((StatefulSet|DaemonSet)/)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    265
);

/// An RFC 3339 time (`format: date-time`), kept in UTC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Time(pub DateTime<Utc>);

impl Time {
    /// RFC 3339 `date-time`: `T` (or `t`) between date and time, `Z` or a `±hh:mm` offset.
    pub const PATTERN: &str =
        "^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$";
}

impl TryFrom<String> for Time {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        static RE: LazyLock<Regex> = LazyLock::new(|| compile(Time::PATTERN));
        let parsed = RE
            .is_match(&value)
            .then(|| DateTime::parse_from_rfc3339(&value).ok())
            .flatten();
        match parsed {
            Some(t) => Ok(Self(t.to_utc())),
            None => Err(format!(
                "must be an RFC 3339 time such as 2026-11-22T03:00:00Z, got '{}'",
                value.escape_debug()
            )),
        }
    }
}

impl PartialSchema for Time {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(SchemaType::Type(Type::String))
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .description(Some("an RFC 3339 time, e.g. 2026-11-22T03:00:00Z"))
            .into()
    }
}
impl ToSchema for Time {}

/// A page size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Limit(pub u32);

impl Default for Limit {
    fn default() -> Self {
        Limit(DEFAULT_LIMIT)
    }
}

impl TryFrom<String> for Limit {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        let digits = !value.is_empty() && value.len() <= 10 && value.bytes().all(|b| b.is_ascii_digit());
        match value.parse::<u32>() {
            Ok(n) if digits && (1..=MAX_LIMIT).contains(&n) => Ok(Self(n)),
            _ => Err(format!(
                "must be an integer from 1 to {MAX_LIMIT}, got '{}'",
                value.escape_debug()
            )),
        }
    }
}

impl PartialSchema for Limit {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(SchemaType::Type(Type::Integer))
            .description(Some("page size"))
            .minimum(Some(1))
            .maximum(Some(MAX_LIMIT))
            .default(Some(DEFAULT_LIMIT.into()))
            .into()
    }
}
impl ToSchema for Limit {}

/// Which listing a cursor belongs to: its first character.
pub trait Listing {
    const TAG: char;
}

/// A position in one listing: the journal row id the next page continues before.
///
/// Opaque to clients (pass the `next_cursor` of the previous page), but not secret: every string
/// the pattern admits is a valid position, so a schema-valid cursor is never refused. A cursor of
/// another listing does not match the pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor<L> {
    pub before: i64,
    listing: std::marker::PhantomData<L>,
}

/// Hex digits in a cursor at most (ids below 2^60).
const CURSOR_DIGITS: usize = 15;

impl<L: Listing> Cursor<L> {
    pub fn new(before: i64) -> Self {
        Self {
            before,
            listing: std::marker::PhantomData,
        }
    }

    pub fn pattern() -> String {
        format!("^{}[0-9a-f]{{1,{CURSOR_DIGITS}}}$", L::TAG)
    }
}

impl<L: Listing> fmt::Display for Cursor<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{:x}", L::TAG, self.before)
    }
}

impl<L: Listing> TryFrom<String> for Cursor<L> {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        let hex = value.strip_prefix(L::TAG).filter(|h| {
            (1..=CURSOR_DIGITS).contains(&h.len())
                && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        });
        match hex.and_then(|h| i64::from_str_radix(h, 16).ok()) {
            Some(before) => Ok(Self::new(before)),
            None => Err(format!(
                "is not a cursor of this listing (pass the next_cursor of its previous page), got '{}'",
                value.escape_debug()
            )),
        }
    }
}

impl<'de, L: Listing> Deserialize<'de> for Cursor<L> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Self::try_from(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl<L: Listing> Serialize for Cursor<L> {
    fn serialize<S2: serde::Serializer>(&self, s: S2) -> Result<S2::Ok, S2::Error> {
        s.collect_str(self)
    }
}

impl<L: Listing> PartialSchema for Cursor<L> {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(SchemaType::Type(Type::String))
            .description(Some(
                "opaque position in this listing: the next_cursor of the previous page",
            ))
            .pattern(Some(Self::pattern()))
            .into()
    }
}

/// The listings, as cursor tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Restarts;
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transitions;
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slots;
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Records;
impl Listing for Restarts {
    const TAG: char = 'h';
}
impl Listing for Transitions {
    const TAG: char = 't';
}
impl Listing for Slots {
    const TAG: char = 'm';
}
impl Listing for Records {
    const TAG: char = 's';
}

/// A custom resource kind whose transitions are journaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
pub enum Kind {
    Eru,
    PodSet,
    Memcached,
}

/// The wire name of a vocabulary value (`in_progress`, `operator_down`, `Eru`, ...).
pub fn wire_name(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        other => unreachable!("a unit variant serializes as a string: {other:?}"),
    }
}

/// The wire names of every variant of a vocabulary, as the document lists them.
pub fn vocabulary<T: ToSchema>() -> Vec<String> {
    let RefOr::T(S::Object(object)) = T::schema() else {
        unreachable!("vocabularies are string enums")
    };
    object
        .enum_values
        .unwrap_or_default()
        .into_iter()
        .filter_map(|v| v.as_str().map(String::from))
        .collect()
}

/// Parameters shared by the three listings.
macro_rules! listing_params {
    ($(#[$doc:meta])* $name:ident, $listing:ty, $cursor_schema:path, { $($(#[$fdoc:meta])* $field:ident: $ty:ty,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Default, Deserialize, IntoParams)]
        #[serde(deny_unknown_fields)]
        #[into_params(parameter_in = Query)]
        pub struct $name {
            $($(#[$fdoc])* #[param(inline)] pub $field: Option<$ty>,)*
            /// Only entries at or after this time (RFC 3339).
            #[param(inline)]
            pub since: Option<Time>,
            /// Only entries before this time (RFC 3339). A `since` after `until` selects nothing.
            #[param(inline)]
            pub until: Option<Time>,
            /// Page size, 1 to 1000; 100 when omitted.
            #[param(inline)]
            pub limit: Option<Limit>,
            /// Opaque: the `next_cursor` of the previous page.
            #[param(schema_with = $cursor_schema)]
            pub cursor: Option<Cursor<$listing>>,
        }
    };
}

listing_params!(
    /// Query parameters of `GET /history`.
    HistoryParams, Restarts, Cursor::<Restarts>::schema, {
        /// Namespace of the Eru.
        namespace: Namespace,
        /// Name of the Eru.
        name: ObjectName,
        /// Uid of the Eru: only its own ledger, not a namesake's (an Eru deleted and created
        /// again under its name).
        uid: Uid,
        /// The restarted workload: a Deployment's name, or `StatefulSet/<name>`, `DaemonSet/<name>`.
        target: TargetName,
        /// How the restart ended.
        outcome: Outcome,
    }
);

listing_params!(
    /// Query parameters of `GET /transitions`.
    TransitionParams, Transitions, Cursor::<Transitions>::schema, {
        /// Kind of the object.
        kind: Kind,
        /// Namespace of the object.
        namespace: Namespace,
        /// Name of the object.
        name: ObjectName,
    }
);

listing_params!(
    /// Query parameters of `GET /missed`.
    MissedParams, Slots, Cursor::<Slots>::schema, {
        /// Namespace of the Eru.
        namespace: Namespace,
        /// Name of the Eru.
        name: ObjectName,
        /// Uid of the Eru: only its own ledger, not a namesake's (an Eru deleted and created
        /// again under its name).
        uid: Uid,
        /// The workload: a Deployment's name, or `StatefulSet/<name>`, `DaemonSet/<name>`.
        target: TargetName,
        /// Why the slot was not restarted.
        reason: Reason,
    }
);

listing_params!(
    /// Query parameters of `GET /slots`.
    SlotParams, Records, Cursor::<Records>::schema, {
        /// Namespace of the Eru.
        namespace: Namespace,
        /// Name of the Eru.
        name: ObjectName,
        /// Uid of the Eru: only its own ledger, not a namesake's (an Eru deleted and created
        /// again under its name).
        uid: Uid,
        /// The workload: a Deployment's name, or `StatefulSet/<name>`, `DaemonSet/<name>`.
        target: TargetName,
        /// How the slot was accounted.
        result: SlotResult,
        /// Why a slot was not restarted.
        reason: Reason,
    }
);

#[cfg(test)]
mod tests;
