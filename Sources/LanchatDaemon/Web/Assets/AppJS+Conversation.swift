extension WebAssets {
    /// The conversation: messages, files and images, transfers, the events that update the page, uploads.
    static let appJSConversation = #"""
        function scrollToEnd() { $('messages').scrollTop = $('messages').scrollHeight; }

        function addMessage(message) {
          if (message.room !== state.room || state.search) return;
          const list = $('messages');
          for (const item of list.children) if (item.dataset.messageId === message.id) return;
          list.append(messageItem(message));
          scrollToEnd();
        }

        function imageURL(path) { return `/file?path=${encodeURIComponent(path)}&token=${encodeURIComponent(token)}`; }

        // Full size in the page, on a click (not in a tab of its own: its address, with the token, would
        // stay in the browser's history).
        function thumbnail(transfer) {
          const toggle = el('button', null, 'thumb-button');
          toggle.type = 'button';
          toggle.setAttribute('aria-expanded', 'false');
          toggle.setAttribute('aria-label', `${transfer.name}, from ${transfer.peer}: show full size`);
          const image = el('img', null, 'thumb');
          image.src = imageURL(transfer.path);
          image.alt = `${transfer.name}, from ${transfer.peer}`;
          image.addEventListener('error', () => toggle.remove());
          toggle.addEventListener('click', () => {
            toggle.setAttribute('aria-expanded', String(image.classList.toggle('full')));
          });
          toggle.append(image);
          return toggle;
        }

        function imageItem(transfer) {
          const item = el('li', null, 'file');
          item.dataset.transferId = transfer.id;
          item.append(el('span', transfer.peer, 'sender'), el('span', `sent ${transfer.name}`, 'text'), thumbnail(transfer));
          return item;
        }

        // Images received while the page is open join the conversation where they arrived (and stay
        // there when it is drawn again); every received image is also in the transfers list.
        function showImage(transfer) {
          // The same picture from another transfer (a shared file fetched by itself, then again) once.
          const key = `${transfer.name}/${transfer.size}`;
          if (state.shownImages.has(transfer.id) || state.shownKeys.has(key)) return;
          state.shownImages.add(transfer.id);
          state.shownKeys.add(key);
          if (state.search) return;
          placeImage(transfer);
          scrollToEnd();
        }

        function placeImage(transfer) {
          // A file shared in the room that this host fetched by itself: shown with its announcement.
          const key = `${transfer.name}/${transfer.size}`;
          const announced = [...$('messages').children].find((candidate) => candidate.dataset.fileKey === key);
          if (announced) {
            if (!announced.querySelector('img')) announced.append(thumbnail(transfer));
          } else {
            $('messages').append(imageItem(transfer));
          }
        }

        function isShownImage(transfer) {
          return transfer.direction === 'incoming' && transfer.state === 'complete' && transfer.path && imageName.test(transfer.name);
        }

        async function refreshTransfers() {
          const answer = await call('transfers');
          state.transfers = new Map((answer.transfers || []).map((transfer) => [transfer.id, transfer]));
          renderTransfers();
        }

        function renderTransfers() {
          $('transfers').replaceChildren(...[...state.transfers.values()].slice(-20).map((transfer) => {
            const item = el('li');
            item.dataset.transferId = transfer.id;
            const arrow = transfer.direction === 'incoming' ? '←' : '→';
            item.append(el('span', `${transfer.name} ${arrow} ${transfer.peer}`, 'name'), ' ');
            const progress = el('progress');
            progress.max = Math.max(transfer.size, 1);
            progress.value = transfer.done;
            progress.setAttribute('aria-label', `${transfer.name}: ${transfer.state}`);
            item.append(progress, ' ', el('span', transfer.state, 'meta'));
            if (transfer.error) item.append(' ', el('span', transfer.error, 'meta'));
            if (isShownImage(transfer)) item.append(thumbnail(transfer));
            if (!['complete', 'refused', 'failed', 'cancelled'].includes(transfer.state)) {
              item.append(' ', button('Cancel', async () => {
                try { await call('cancel', { id: transfer.id }); } catch (error) { showError(error.message); }
              }, `Cancel ${transfer.name}`));
            }
            return item;
          }));
        }

        let peersTimer = null;
        function onEvent(event) {
          switch (event.type) {
            case 'found': case 'changed': case 'lost':
              clearTimeout(peersTimer);
              peersTimer = setTimeout(() => refreshPeers().catch((error) => showError(error.message)), 200);
              break;
            case 'invitation': case 'invitation_closed':
              if (event.type === 'invitation' && window.Notification && Notification.permission === 'granted') {
                new Notification('lanchat invitation', { body: `${event.invitation.from} invites you to ${event.invitation.room}` });
              }
              refreshInvitations().catch((error) => showError(error.message));
              break;
            case 'meta':
              if (event.meta && event.meta.room === state.room) refreshTopic().catch((error) => showError(error.message));
              break;
            case 'member': case 'left': case 'presence':
              refreshRooms().then(() => event.type === 'presence' ? refreshPresence() : null).catch((error) => showError(error.message));
              break;
            case 'typing':
              if (event.member && event.member.room === state.room) {
                $('typing').textContent = `${event.member.name} is typing…`;
                clearTimeout(state.typingTimer);
                state.typingTimer = setTimeout(() => { $('typing').textContent = ''; }, 5000);
              }
              break;
            case 'message':
              if (!state.room) {
                refreshRooms().then(refreshHistory).catch((error) => showError(error.message));
              } else {
                addMessage(event.message);
              }
              break;
            case 'transfer':
              state.transfers.set(event.transfer.id, event.transfer);
              renderTransfers();
              if (isShownImage(event.transfer)) showImage(event.transfer);
              if (event.transfer.state === 'complete') onFetched(event.transfer);
              break;
            default:
              break;
          }
        }

        $('send-form').addEventListener('submit', async (submit) => {
          submit.preventDefault();
          const text = $('text').value;
          if (!text.trim() || !state.room) return;
          try {
            await call('send', { room: state.room, text });
            $('text').value = '';
            showError('');
            // The message's own event adds it too; this covers an event missed while reconnecting.
            const recent = await call('history', { room: state.room, limit: 5 });
            for (const message of recent.history || []) addMessage(message);
          } catch (error) { showError(error.message); }
        });

        $('text').addEventListener('input', () => {
          const now = Date.now();
          if (!state.room || now - state.lastTyping < 3000) return;
          state.lastTyping = now;
          call('typing', { room: state.room }).catch(() => {});
        });

        $('hand').addEventListener('click', async () => {
          if (!state.room) return;
          const up = !state.hands.includes(state.room);
          try {
            const answer = await call('hand', { up, room: state.room });
            state.hands = answer.presence.hands;
            updateHandButton();
          } catch (error) { showError(error.message); }
        });

        $('notify').addEventListener('click', async () => {
          if (!window.Notification) { showError('this browser has no notifications'); return; }
          const permission = await Notification.requestPermission();
          $('notify').textContent = permission === 'granted' ? 'Notifications on' : 'Notifications refused';
        });

        // A file goes to the daemon first (a temporary file in its state directory), then each
        // connected member of the room gets it with `send-file`, as `lanchat send-file --room` does.
        $('file').addEventListener('change', () => {
          const files = [...$('file').files];
          $('file').value = '';
          sendFiles(files);
        });

        const main = document.querySelector('main');
        main.addEventListener('dragover', (event) => {
          if (!event.dataTransfer || ![...event.dataTransfer.types].includes('Files')) return;
          event.preventDefault();
          main.classList.add('dropping');
        });
        main.addEventListener('dragleave', () => main.classList.remove('dropping'));
        main.addEventListener('drop', (event) => {
          event.preventDefault();
          main.classList.remove('dropping');
          if (event.dataTransfer) sendFiles([...event.dataTransfer.files]);
        });

        async function sendFiles(files) {
          const room = state.rooms.find((candidate) => candidate.room === state.room);
          const to = $('file-to').value;
          if (to === 'share') { await shareFiles(room, files); return; }
          const members = room ? room.members.filter((member) => member.state === 'connected' && (!to || member.id === to)) : [];
          if (members.length === 0) { showError('nobody connected in this room to send the file to'); return; }
          for (const file of files) {
            try {
              const upload = await uploadFile(file, members.length);
              await Promise.all(members.map((member, index) => call('send-file', {
                peer: member.id, path: upload.path, file_token: upload.file_tokens[index],
              })));
              showError('');
              await refreshTransfers();
            } catch (error) { showError(`${file.name}: ${error.message}`); }
          }
        }

        // Shared in the room (`share`): kept by this host and announced, for members now and later.
        async function shareFiles(room, files) {
          if (!room) { showError('no room to share the file in'); return; }
          for (const file of files) {
            try {
              const upload = await uploadFile(file, 1);
              await call('share', { room: room.room, path: upload.path, file_token: upload.file_tokens[0] });
              showError('');
              showNotice(`shared ${file.name} in ${room.room}`);
            } catch (error) { showError(`${file.name}: ${error.message}`); }
          }
        }

        async function uploadFile(file, count) {
          const response = await fetch(`/upload?name=${encodeURIComponent(file.name)}&count=${count}`, {
            method: 'POST', body: file, headers: { 'X-Lanchat-Token': token }, cache: 'no-store',
          });
          if (!response.ok) throw new Error(await response.text());
          return response.json();
        }

        $('presence-form').addEventListener('submit', async (submit) => {
          submit.preventDefault();
          try {
            const answer = await call('presence', { availability: $('availability').value, text: $('status-text').value });
            state.hands = answer.presence.hands;
            showError('');
          } catch (error) { showError(error.message); }
        });

        $('invite-form').addEventListener('submit', async (submit) => {
          submit.preventDefault();
          if (!$('invite-peer').value) { showError('no peer to invite'); return; }
          try {
            const answer = await call('invite', {
              peer: $('invite-peer').value, room: $('invite-room').value, message: $('invite-message').value || undefined,
            });
            $('invite-message').value = '';
            showError('');
            showNotice(`invited ${answer.invite.peer} to ${answer.invite.room}: ${answer.invite.outcome}`);
          } catch (error) { showError(error.message); }
        });

        $('topic-form').addEventListener('submit', async (submit) => {
          submit.preventDefault();
          if (!state.room) return;
          try {
            await call('meta', { action: 'set', room: state.room, key: 'topic', value: $('topic').value });
            showError('');
            await refreshTopic();
          } catch (error) { showError(error.message); }
        });

        $('search-form').addEventListener('submit', async (submit) => {
          submit.preventDefault();
          state.search = $('search').value.trim();
          try { await refreshHistory(); } catch (error) { showError(error.message); }
        });

        $('search-clear').addEventListener('click', async () => {
          state.search = '';
          $('search').value = '';
          try { await refreshHistory(); } catch (error) { showError(error.message); }
        });

        connect();
        """#
}
