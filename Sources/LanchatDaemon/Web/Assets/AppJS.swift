extension WebAssets {
    static let appJS = #"""
        x
        """#
}
