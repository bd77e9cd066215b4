extension WebAssets {
    static let indexHTML = #"""
        x
        """#
}
