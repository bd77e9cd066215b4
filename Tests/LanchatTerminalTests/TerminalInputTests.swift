import LanchatTerminal
import Testing

@Suite struct KeyDecoderTests {
    @Test(arguments: [
        ([UInt8]("héllo".utf8), [Key.text("héllo")]),
        ([0x1b, 0x5b, 0x41, 0x1b, 0x5b, 0x42, 0x1b, 0x5b, 0x43, 0x1b, 0x5b, 0x44], [.up, .down, .right, .left]),
        ([0x1b, 0x5b, 0x48, 0x1b, 0x5b, 0x46, 0x1b, 0x4f, 0x48, 0x1b, 0x5b, 0x33, 0x7e], [.home, .end, .home, .delete]),
        ([0x61, 0x0d, 0x62, 0x7f], [.text("a"), .enter, .text("b"), .backspace]),
        ([0x15, 0x0b, 0x17, 0x03, 0x04, 0x0c, 0x01, 0x05], [.killToStart, .killToEnd, .killWord, .interrupt, .endOfInput, .redraw, .home, .end]),
        // Unknown sequences and other control characters are dropped, not typed.
        ([0x1b, 0x5b, 0x31, 0x35, 0x7e, 0x07, 0x61], [.text("a")]),
    ])
    func decodes(bytes: [UInt8], keys: [Key]) {
        var decoder = KeyDecoder()
        #expect(decoder.feed(bytes) == keys)
    }

    @Test func waitsForTheRestOfASplitSequence() {
        var decoder = KeyDecoder()
        let euro = Array("€".utf8)
        #expect(decoder.feed([0x1b]) == [])
        #expect(decoder.feed([0x5b]) == [])
        #expect(decoder.feed([0x44, euro[0]]) == [.left])
        #expect(decoder.feed(Array(euro[1...])) == [.text("€")])
    }

    @Test func bracketedPasteKeepsNewlinesEvenSplit() {
        var decoder = KeyDecoder()
        let all = Array("\u{1b}[200~one\ntwo\u{1b}[201~x".utf8)
        var keys: [Key] = []
        for byte in all { keys += decoder.feed([byte]) }
        #expect(keys == [.paste("one\ntwo"), .text("x")])
    }
}

@Suite struct LineEditorTests {
    func typed(_ keys: [Key], into editor: inout LineEditor) -> [LineEditor.Outcome] {
        keys.map { editor.apply($0) }
    }

    @Test func editsAndSubmits() {
        var editor = LineEditor()
        _ = typed([.text("helo"), .left, .text("l"), .end, .text(" world")], into: &editor)
        #expect(editor.text == "hello world" && editor.cursor == 11)
        _ = typed([.killWord], into: &editor)
        #expect(editor.text == "hello ")
        _ = typed([.home, .delete, .text("H")], into: &editor)
        #expect(editor.text == "Hello " && editor.cursor == 1)
        _ = typed([.killToEnd], into: &editor)
        #expect(editor.text == "H")
        #expect(editor.apply(.enter) == .submit(["H"]))
        #expect(editor.text == "" && editor.cursor == 0)
        #expect(editor.apply(.enter) == .none)  // an empty line is not sent
    }

    @Test func historyKeepsTheDraft() {
        var editor = LineEditor()
        _ = typed([.text("first"), .enter, .text("second"), .enter, .text("draft")], into: &editor)
        _ = editor.apply(.up)
        #expect(editor.text == "second")
        _ = editor.apply(.up)
        #expect(editor.text == "first")
        _ = editor.apply(.up)
        #expect(editor.text == "first")
        _ = editor.apply(.down)
        _ = editor.apply(.down)
        #expect(editor.text == "draft")
    }

    @Test func aPasteOfSeveralLinesSendsEachAndKeepsTheRest() {
        var editor = LineEditor()
        _ = editor.apply(.text("> "))
        #expect(editor.apply(.paste("a\r\nb\n\nc")) == .submit(["> a", "b"]))
        #expect(editor.text == "c")
        #expect(editor.apply(.paste("no newline")) == .none)
        #expect(editor.text == "cno newline")
    }

    @Test func controlKeys() {
        var editor = LineEditor()
        #expect(editor.apply(.endOfInput) == .endOfInput)
        _ = editor.apply(.text("x"))
        #expect(editor.apply(.endOfInput) == .none)  // Ctrl-D on a line deletes, as in a shell
        #expect(editor.apply(.interrupt) == .interrupt)
    }

    @Test func theLineIsBounded() {
        var editor = LineEditor()
        _ = editor.apply(.text(String(repeating: "a", count: LineEditor.maximumLength + 10)))
        #expect(editor.characters.count == LineEditor.maximumLength)
    }
}
