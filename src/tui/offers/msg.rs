//! The Offers view's messages from its services.

/// What the offers' services report.
#[derive(Debug, Clone)]
pub enum Msg {
    /// A live refresh of the catalog finished (`Command::RefreshOffers`): the catalog
    /// and a one-line report.
    Refreshed(Result<(Box<crate::catalog::Catalog>, String), String>),
}
