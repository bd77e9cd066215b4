import LanchatEngine
import Testing

/// `SessionError.Code`'s raw values are what the control API sends as `error.code`, and scripts compare
/// them: this list pins them (a change here is a change of the control API).
@Suite struct SessionErrorCodeTests {
    @Test func theCodesAreTheControlAPIsStrings() {
        #expect(
            SessionError.Code.allCases.map(\.rawValue).sorted() == [
                "ambiguous", "bad_file", "bad_key", "bad_request", "bad_text", "bad_topic", "bad_value", "busy",
                "corrupt", "history", "not_a_member", "not_admin", "not_found", "rate_limited", "refused", "removed",
                "reserved_key", "stopped", "storage", "stream_aborted", "stream_finished", "stream_refused", "too_large",
                "too_late", "too_long", "too_many_keys", "too_many_topics", "too_many_versions", "unknown_invitation",
                "unknown_key", "unknown_member", "unknown_room", "unknown_transfer", "unreachable", "unsupported",
                "version_mismatch", "write_failed",
            ])
    }

    /// docs/control-api.schema.json: `error.code` matches `^[a-z_]+$`.
    @Test func everyCodeMatchesTheSchemasPattern() {
        for raw in SessionError.Code.allCases.map(\.rawValue) { #expect(!raw.isEmpty && raw.allSatisfy { ("a"..."z").contains($0) || $0 == "_" }, "\(raw)") }
    }
}
