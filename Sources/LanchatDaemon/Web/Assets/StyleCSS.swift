extension WebAssets {
    static let styleCSS = #"""
        :root { color-scheme: light dark; --accent: #2563eb; --muted: #6b7280; --line: #d1d5db; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 16px/1.4 system-ui, sans-serif; }
        header { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: baseline; padding: .5rem 1rem; border-bottom: 1px solid var(--line); }
        h1 { font-size: 1.25rem; margin: 0; }
        h2 { font-size: 1rem; margin: .75rem 0 .25rem; }
        header p { margin: 0; color: var(--muted); overflow-wrap: anywhere; }
        .layout { display: grid; grid-template-columns: minmax(14rem, 20rem) minmax(0, 1fr); gap: 1rem; padding: 0 1rem 1rem; }
        @media (max-width: 40rem) { .layout { grid-template-columns: minmax(0, 1fr); } }
        .layout > * { min-width: 0; }
        select, input { max-width: 100%; }
        ul, ol { list-style: none; margin: 0; padding: 0; }
        li { padding: .25rem 0; overflow-wrap: anywhere; }
        .hint, .meta, #typing { color: var(--muted); font-size: .85rem; margin: 0; }
        .code { font-family: ui-monospace, monospace; font-weight: 600; }
        #messages { border: 1px solid var(--line); border-radius: .375rem; padding: .5rem; min-height: 12rem; max-height: 60vh; overflow-y: auto; }
        #messages li.system { color: var(--muted); font-style: italic; }
        .sender { font-weight: 600; margin-right: .35rem; }
        .time { color: var(--muted); font-size: .8rem; margin-right: .35rem; }
        .thumb { display: block; max-width: min(16rem, 100%); max-height: 12rem; margin-top: .25rem; border-radius: .25rem; }
        .thumb-button { display: block; padding: 0; border: none; background: none; cursor: zoom-in; }
        .thumb.full { max-width: 100%; max-height: none; cursor: zoom-out; }
        form { display: flex; flex-wrap: wrap; gap: .5rem; margin-top: .5rem; align-items: center; }
        form label { flex-basis: 100%; font-size: .85rem; color: var(--muted); }
        #text { flex: 1 1 10rem; min-width: 0; padding: .5rem; font: inherit; }
        button, .button { font: inherit; padding: .4rem .8rem; border: 1px solid var(--accent); border-radius: .375rem; background: transparent; color: inherit; cursor: pointer; }
        button[aria-pressed="true"] { background: var(--accent); color: white; }
        button:focus-visible, .button:focus-within, input:focus-visible, a:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
        .tools { display: flex; flex-wrap: wrap; gap: .5rem; margin-top: .5rem; }
        .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
        .skip { position: absolute; left: -100rem; }
        .skip:focus { left: 1rem; top: .5rem; background: Canvas; padding: .25rem; }
        .room.current { font-weight: 600; }
        .hand { font-weight: 600; }
        #invitations li { border: 1px solid var(--accent); border-radius: .375rem; padding: .5rem; margin-bottom: .5rem; }
        #invitations button { margin: .25rem .25rem 0 0; }
        #error { color: #b91c1c; }
        progress { width: 8rem; vertical-align: middle; }
        #presence-form, #invite-form, #search-form, #topic-form { display: flex; flex-wrap: wrap; gap: .35rem; align-items: center; margin: .25rem 0; }
        #presence-form label, #invite-form label, #search-form label, #topic-form label { flex-basis: auto; }
        #presence-form { margin-left: auto; }
        #invite-form input, #invite-form select, #presence-form input { min-width: 0; max-width: 100%; }
        main.dropping #messages { outline: 3px dashed var(--accent); }
        .tools label[for] { align-self: center; }
        """#
}
