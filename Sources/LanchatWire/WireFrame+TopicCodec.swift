import LanchatCore
import NIOCore

/// The codec of topics (issue 13, item 3): TOPIC_SUBSCRIPTIONS (0x0B) and TOPIC_MESSAGE (0x0C), both
/// ignorable. `WireFrame+Codec.swift` calls these from its one switch per direction.
extension WireFrame {
    static func readTopic(_ reader: inout FieldReader) throws(WireError) -> String {
        let raw = try reader.lengthPrefixed("topic", lengthType: UInt8.self, limit: 64)
        guard let name = String(validating: raw, as: UTF8.self), TopicMessage.isTopic(name) else { throw .invalidValue(field: "topic") }
        return name
    }

    static func decodeTopic(_ type: FrameType, _ reader: inout FieldReader, flags: UInt8) throws(WireError) -> WireFrame {
        let room = try readRoom(&reader)
        if type == .topicSubscriptions {
            let count = try reader.u8("count")
            guard Int(count) <= TopicSubscriptions.maximumTopics else {
                throw .fieldTooLong(field: "topics", length: Int(count), limit: TopicSubscriptions.maximumTopics)
            }
            var topics: [String] = []
            for _ in 0..<count { topics.append(try readTopic(&reader)) }
            return .topicSubscriptions(TopicSubscriptions(room: room, topics: topics))
        }
        let topic = try readTopic(&reader)
        let sequence = try reader.u64("sequence")
        let text = try reader.text("text", lengthType: UInt16.self, limit: TopicMessage.maximumText)
        return .topicMessage(TopicMessage(room: room, topic: topic, sequence: sequence, text: text, reliable: flags & reliableFlag != 0))
    }

    static func encodeTopic(_ frame: WireFrame, into payload: inout ByteBuffer) throws(WireError) -> RawFrame {
        switch frame {
        case .topicSubscriptions(let subscriptions):
            guard subscriptions.topics.count <= TopicSubscriptions.maximumTopics else {
                throw .fieldTooLong(field: "topics", length: subscriptions.topics.count, limit: TopicSubscriptions.maximumTopics)
            }
            payload.writeLengthPrefixed(Array(subscriptions.room.rawValue.utf8), as: UInt8.self)
            payload.writeInteger(UInt8(subscriptions.topics.count))
            for topic in subscriptions.topics {
                guard TopicMessage.isTopic(topic) else { throw .invalidValue(field: "topic") }
                payload.writeLengthPrefixed(Array(topic.utf8), as: UInt8.self)
            }
            return RawFrame(type: FrameType.topicSubscriptions.rawValue, flags: ignorableFlag, payload: payload)
        case .topicMessage(let message):
            guard TopicMessage.isTopic(message.topic) else { throw .invalidValue(field: "topic") }
            try checkFieldText(message.text, "text", limit: TopicMessage.maximumText)
            payload.writeLengthPrefixed(Array(message.room.rawValue.utf8), as: UInt8.self)
            payload.writeLengthPrefixed(Array(message.topic.utf8), as: UInt8.self)
            payload.writeInteger(message.sequence)
            payload.writeLengthPrefixed(Array(message.text.utf8), as: UInt16.self)
            return RawFrame(type: FrameType.topicMessage.rawValue, flags: ignorableFlag | (message.reliable ? reliableFlag : 0), payload: payload)
        default:
            throw .invalidValue(field: "type")
        }
    }
}
