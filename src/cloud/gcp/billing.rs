//! Cloud Billing Catalog API: the public list prices of a service's SKUs.
//!
//! `GET {billing}/services/{service}/skus?currencyCode=USD&pageSize=5000[&pageToken=T]`,
//! paged by `nextPageToken` (../shared/reference/gcp/billing.md §1–2). Field names are the
//! JSON names of `google.cloud.billing.v1` (`ListSkusResponse`, `Sku`, `PricingInfo`, ...);
//! fields flightdeck does not use are not read. `int64` values (`units`) come as strings.

use super::error::{GcpError, Service};
use super::http::{GcpClient, Page};
use serde::{Deserialize, Deserializer};

/// Compute Engine's service id: VM cores and RAM, GPUs, local SSD.
pub const COMPUTE_ENGINE_SERVICE: &str = "6F81-5844-456A";

/// SKUs per page requested (the API's maximum and default).
pub const PAGE_SIZE: u32 = 5000;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSkusResponse {
    #[serde(default)]
    pub skus: Vec<Sku>,
    #[serde(default)]
    pub next_page_token: String,
}

impl Page for ListSkusResponse {
    fn next_page_token(&self) -> Option<&str> {
        Some(&self.next_page_token)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sku {
    #[serde(default)]
    pub sku_id: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub category: Category,
    /// Regions the price applies to (`us-central1`, ...).
    #[serde(default)]
    pub service_regions: Vec<String>,
    /// Normally one entry: the price in force.
    #[serde(default)]
    pub pricing_info: Vec<PricingInfo>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Category {
    #[serde(default)]
    pub service_display_name: String,
    /// `Compute`, `Storage`, `Network`, `License`, ...
    #[serde(default)]
    pub resource_family: String,
    /// `CPU`, `RAM`, `GPU`, `N1Standard`, ...
    #[serde(default)]
    pub resource_group: String,
    /// `OnDemand`, `Preemptible`, `Commit1Yr`, ...
    #[serde(default)]
    pub usage_type: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PricingInfo {
    #[serde(default)]
    pub effective_time: String,
    #[serde(default)]
    pub pricing_expression: PricingExpression,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PricingExpression {
    /// `h`, `GiBy.h`, `GiBy.mo`, ...
    #[serde(default)]
    pub usage_unit: String,
    #[serde(default)]
    pub tiered_rates: Vec<TierRate>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TierRate {
    #[serde(default)]
    pub start_usage_amount: f64,
    #[serde(default)]
    pub unit_price: Money,
}

/// `google.type.Money`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Money {
    #[serde(default)]
    pub currency_code: String,
    #[serde(default, deserialize_with = "int64")]
    pub units: i64,
    #[serde(default)]
    pub nanos: i32,
}

impl Money {
    pub fn value(&self) -> f64 {
        self.units as f64 + f64::from(self.nanos) / 1e9
    }
}

impl Sku {
    /// The price of one `usage_unit` in USD: the first tier of the first pricing info (as
    /// SkyPilot and gpuhunt read it), with its unit. `None` when there is none or it is not
    /// in USD.
    pub fn unit_price(&self) -> Option<(f64, &str)> {
        let expr = &self.pricing_info.first()?.pricing_expression;
        let tier = expr.tiered_rates.first()?;
        if !tier.unit_price.currency_code.is_empty() && tier.unit_price.currency_code != "USD" {
            return None;
        }
        Some((tier.unit_price.value(), expr.usage_unit.as_str()))
    }
}

/// An `int64` as Google's JSON writes it (a string), or as a plain number.
fn int64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Int {
        N(i64),
        S(String),
    }
    match Int::deserialize(d)? {
        Int::N(n) => Ok(n),
        Int::S(s) => s
            .trim()
            .parse()
            .map_err(|_| serde::de::Error::custom(format!("expected an int64, found {s:?}"))),
    }
}

/// Every SKU of `service`, page by page: `on_page` gets each page's SKUs (so that a caller
/// can reduce them before the next page arrives). Returns the number of pages.
pub async fn list_skus(
    client: &GcpClient,
    service: &str,
    mut on_page: impl FnMut(Vec<Sku>) -> Result<(), GcpError>,
) -> Result<usize, GcpError> {
    let url = client.url(Service::Billing, &format!("/services/{service}/skus"));
    let query = [
        ("currencyCode", "USD".to_string()),
        ("pageSize", PAGE_SIZE.to_string()),
    ];
    client
        .list_pages(
            Service::Billing,
            &url,
            &query,
            "Cloud Billing SKUs",
            |page: ListSkusResponse| on_page(page.skus),
        )
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_sku_shape_reads() {
        // billing.md §2.1, first SKU.
        let page = r#"{"skus": [{
          "name": "services/6F81-5844-456A/skus/AAAA-BBBB-CCCC", "skuId": "AAAA-BBBB-CCCC",
          "description": "Nvidia H100 80GB GPU running in Americas",
          "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute",
                       "resourceGroup": "GPU", "usageType": "OnDemand"},
          "serviceRegions": ["us-central1", "us-east4"],
          "pricingInfo": [{"effectiveTime": "2026-11-21T12:00:00.000Z", "summary": "",
            "pricingExpression": {"usageUnit": "h", "displayQuantity": 1,
              "tieredRates": [{"startUsageAmount": 0,
                 "unitPrice": {"currencyCode": "USD", "units": "9", "nanos": 796550569}}],
              "usageUnitDescription": "hour", "baseUnit": "s", "baseUnitDescription": "second",
              "baseUnitConversionFactor": 3600},
            "aggregationInfo": {"aggregationLevel": "ACCOUNT", "aggregationInterval": "DAILY", "aggregationCount": 1},
            "currencyConversionRate": 1}],
          "serviceProviderName": "Google",
          "geoTaxonomy": {"type": "MULTI_REGIONAL", "regions": ["us-central1", "us-east4"]}}],
          "nextPageToken": "abc"}"#;
        let r: ListSkusResponse = serde_json::from_str(page).unwrap();
        assert_eq!(r.next_page_token, "abc");
        let s = &r.skus[0];
        assert_eq!(s.category.resource_group, "GPU");
        assert_eq!(s.service_regions, ["us-central1", "us-east4"]);
        let (p, unit) = s.unit_price().unwrap();
        assert!((p - 9.796550569).abs() < 1e-12, "{p}");
        assert_eq!(unit, "h");
    }

    #[test]
    fn money_units_as_string_or_number_and_other_currencies() {
        let m: Money =
            serde_json::from_str(r#"{"currencyCode": "USD", "units": 2, "nanos": 500000000}"#).unwrap();
        assert_eq!(m.value(), 2.5);
        let m: Money = serde_json::from_str(r#"{"currencyCode": "USD", "nanos": 31611000}"#).unwrap();
        assert!((m.value() - 0.031611).abs() < 1e-12);
        assert!(serde_json::from_str::<Money>(r#"{"units": "x"}"#).is_err());
        let mut sku = Sku::default();
        assert_eq!(sku.unit_price(), None, "no pricing info");
        sku.pricing_info.push(PricingInfo::default());
        assert_eq!(sku.unit_price(), None, "no tier");
        sku.pricing_info[0]
            .pricing_expression
            .tiered_rates
            .push(TierRate {
                start_usage_amount: 0.0,
                unit_price: Money {
                    currency_code: "EUR".into(),
                    units: 1,
                    nanos: 0,
                },
            });
        assert_eq!(sku.unit_price(), None, "not USD");
    }
}
