extension WebAssets {
    static let styleCSS = #"""
        x
        """#
}
