/// The page's files, embedded in the binary (nothing is loaded from elsewhere). Each lives in
/// `Assets/` as a raw string literal, written by hand: HTML, CSS and an ES module, no build step.
enum WebAssets {
    struct Asset: Sendable {
        var type: String
        var text: String
    }

    static let byName: [String: Asset] = [
        "index.html": Asset(type: "text/html; charset=utf-8", text: indexHTML),
        "app.js": Asset(type: "text/javascript; charset=utf-8", text: appJS),
        "style.css": Asset(type: "text/css; charset=utf-8", text: styleCSS),
    ]
}
