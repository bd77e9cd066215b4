import LanchatControl
import LanchatEngine

/// The one way a session error reaches a control client: its code's raw value and its message, unchanged
/// (the control API's `error` object is the session's own words).
extension ControlError {
    init(_ error: SessionError) {
        self.init(code: Code(error.code), message: error.message)
    }
}

extension ControlError.Code {
    /// The control API's code for a session code: the same string (every session code is one of `known`).
    init(_ code: SessionError.Code) {
        self.init(rawValue: code.rawValue)
    }
}
