//! The `secrets` entries of capability sets on the wire: a bare name, or an
//! object binding the secret to hosts and headers (see
//! [`turnstone_runtime::SecretGrant`]). Written-out schemas: "a string or an
//! object whose `header` is a string or a list" is a union the derive cannot
//! express, and a grant's patterns must be the whole check the handler makes.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use turnstone_runtime::SecretGrant;
use utoipa::ToSchema;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, Type};

/// What a secret name may be in a grant.
const NAME_PATTERN: &str = "^[A-Za-z0-9_./-]{1,256}$";
/// An HTTP header name (a token), as `http::HeaderName` accepts it.
const HEADER_PATTERN: &str = "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$";
/// A granted host: as an `http` grant entry, without `<public>`.
const HOST_PATTERN: &str = "^[\\t\\n\\r ]*([Hh][Tt][Tt][Pp][Ss]?://)?\
     ((\\*\\.)?[A-Za-z0-9.-]+|\\[[0-9A-Fa-f:.]+\\])\
     (:\\+?0*([0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|\
     655[0-2][0-9]|6553[0-5]))?/*[\\t\\n\\r ]*$";

fn schema(patterns: bool) -> RefOr<Schema> {
    let string = |pattern: &str| {
        let s = ObjectBuilder::new().schema_type(Type::String);
        if patterns {
            s.pattern(Some(pattern))
        } else {
            s
        }
    };
    let header = OneOfBuilder::new()
        .item(string(HEADER_PATTERN))
        .item(ArrayBuilder::new().items(string(HEADER_PATTERN)));
    let bound = ObjectBuilder::new()
        .description(Some(
            "A secret bound to hosts (empty: the grant's named `http` hosts) and header names \
             (absent: what the manifest asks for, else `authorization`)",
        ))
        .property("name", string(NAME_PATTERN))
        .required("name")
        .property("hosts", ArrayBuilder::new().items(string(HOST_PATTERN)))
        .property("header", header)
        .additional_properties(Some(
            utoipa::openapi::schema::AdditionalProperties::FreeForm(false),
        ));
    OneOfBuilder::new()
        .description(Some(
            "A secret's name (sent only in `authorization`, or the header the manifest asks for, \
             to the named `http` hosts), or `{name, hosts, header}`",
        ))
        .item(string(NAME_PATTERN).description(Some("The secret's name, with the default binding")))
        .item(bound)
        .into()
}

/// A `secrets` entry of a listed capability set (a manifest may say
/// `<configured>`, so the schema names no patterns).
pub(crate) struct SecretOut(pub(crate) SecretGrant);

impl Serialize for SecretOut {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl utoipa::PartialSchema for SecretOut {
    fn schema() -> RefOr<Schema> {
        schema(false)
    }
}

impl ToSchema for SecretOut {}

/// A `secrets` entry of a grant.
pub(crate) struct SecretIn(pub(crate) SecretGrant);

impl<'de> Deserialize<'de> for SecretIn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        SecretGrant::deserialize(d).map(SecretIn)
    }
}

impl utoipa::PartialSchema for SecretIn {
    fn schema() -> RefOr<Schema> {
        schema(true)
    }
}

impl ToSchema for SecretIn {}
