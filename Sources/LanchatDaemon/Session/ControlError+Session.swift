import LanchatControl
import LanchatEngine

/// The one way a session error reaches a control client: its code's raw value and its message, unchanged
/// (the control API's `error` object is the session's own words).
extension ControlError {
    init(_ error: SessionError) {
        self.init(code: error.code.rawValue, message: error.message)
    }
}
