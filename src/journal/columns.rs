//! The vocabulary's values as journal columns ([`crate::vocab`]): written as their wire names,
//! read back typed. A row holding a name outside the vocabulary fails its read (and the query
//! names the row's key, as every keyed read does: [`super::Keyed`]).

use sqlx::{
    Any, Decode, Encode, Type,
    any::{AnyTypeInfo, AnyValueRef},
    encode::IsNull,
    error::BoxDynError,
};

use crate::vocab::{NoticeEvent, Outcome, Reason, RunOutcome, SlotResult};

/// Free text from elsewhere (an API server's error message) as the journal keeps it: PostgreSQL
/// refuses a NUL character in text, which would fail the whole entry, so it becomes U+FFFD on
/// either backend.
pub(super) fn free_text(text: &str) -> String {
    text.replace('\0', "\u{FFFD}")
}

macro_rules! text_column {
    ($($kind:ty: $what:literal),*) => {$(
        impl Type<Any> for $kind {
            fn type_info() -> AnyTypeInfo {
                <str as Type<Any>>::type_info()
            }

            fn compatible(ty: &AnyTypeInfo) -> bool {
                <str as Type<Any>>::compatible(ty)
            }
        }

        impl<'r> Decode<'r, Any> for $kind {
            fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
                let name = <&str as Decode<Any>>::decode(value)?;
                <$kind>::parse(name).ok_or_else(|| format!(concat!("'{}' is no ", $what), name).into())
            }
        }

        impl<'q> Encode<'q, Any> for $kind {
            fn encode_by_ref(&self, buf: &mut <Any as sqlx::Database>::ArgumentBuffer) -> Result<IsNull, BoxDynError> {
                <&str as Encode<Any>>::encode(self.as_str(), buf)
            }
        }
    )*};
}

text_column!(
    SlotResult: "slot result",
    Reason: "reason",
    Outcome: "restart outcome",
    RunOutcome: "manual run outcome",
    NoticeEvent: "notification event"
);
