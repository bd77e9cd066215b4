import Foundation
import LanchatControl
@testable import LanchatDaemon
import LanchatEngine
import Testing

/// A session error reaches a control client through `ControlError(_:)` alone: the same code string and
/// the same message, in the same JSON as before the codes were typed.
@Suite struct ControlErrorMappingTests {
    @Test(arguments: SessionError.Code.allCases)
    func aSessionCodeIsPassedThroughUnchanged(code: SessionError.Code) {
        let error = ControlError(SessionError(code, "what to do"))
        #expect(error.code.rawValue == code.rawValue && error.message == "what to do")
        #expect(ControlError.Code.known.contains(error.code), "\(code) has no ControlError.Code constant")
    }

    @Test func theFailureLineIsTheSameJSON() {
        let line = ControlJSON.line(ControlResponse.failure(id: 7, ControlError(SessionError(.notAMember, "bob is not a member of lab"))))
        #expect(String(decoding: line, as: UTF8.self) == #"{"error":{"code":"not_a_member","message":"bob is not a member of lab"},"id":7,"ok":false}"# + "\n")
    }

    /// The client reads a code it has no constant for (a newer daemon's) as it is.
    @Test func anUnknownCodeDecodes() throws {
        let json = #"{"id":1,"ok":false,"error":{"code":"from_the_future","message":"m"}}"#
        let response = try ControlJSON.decoder().decode(ControlResponse.self, from: Data(json.utf8))
        #expect(response.error == ControlError(code: ControlError.Code(rawValue: "from_the_future"), message: "m"))
        #expect(!ControlError.Code.known.contains(response.error!.code))
    }

    @Test func theKnownCodesAreDistinct() {
        #expect(Set(ControlError.Code.known).count == ControlError.Code.known.count)
    }
}
