//! What becomes a review page: an askama template, or a choice of them (one route that draws
//! one of two pages). Its own file, so that the pages' modules need not import the routes.

/// A page to draw.
pub trait Draw {
    /// The page's HTML.
    fn draw(&self) -> askama::Result<String>;
}

impl<T: askama::Template> Draw for T {
    fn draw(&self) -> askama::Result<String> {
        self.render()
    }
}
