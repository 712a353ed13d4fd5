"""A TCP proxy in front of a real server that can lose a reply or drop every connection.

Faults the servers cannot be asked for: "the write committed, then the connection died
before the reply arrived" (the ambiguous case a retry must not double), and "the server
is gone". Everything else is forwarded byte for byte to the real PostgreSQL or Redis.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class FaultyProxy:
    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._pattern: bytes | None = None
        self._victim: socket.socket | None = None
        self._down = False
        self._closed = False
        self.lost_replies = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def lose_reply_to(self, pattern: bytes) -> None:
        """Forward the next request containing `pattern`, then drop its connection instead
        of passing the server's reply on."""
        with self._lock:
            self._pattern, self._victim = pattern, None

    def down(self) -> None:
        """Cut every connection and refuse new ones, like a server that went away."""
        with self._lock:
            self._down = True
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            self._cut(pair)

    def up(self) -> None:
        with self._lock:
            self._down = False

    def close(self) -> None:
        self._closed = True
        self.down()
        self._listener.close()

    @staticmethod
    def _cut(pair: tuple[socket.socket, socket.socket]) -> None:
        for sock in pair:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                down = self._down
            if down:
                client.close()
                continue
            server = socket.create_connection(self.upstream)
            pair = (client, server)
            with self._lock:
                self._pairs.append(pair)
            threading.Thread(target=self._pump, args=(client, server, pair, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, pair, False), daemon=True).start()

    def _pump(
        self, src: socket.socket, dst: socket.socket, pair: tuple[socket.socket, socket.socket], up: bool
    ) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                with self._lock:
                    if up and self._pattern is not None and self._pattern in data:
                        self._pattern, self._victim = None, pair[0]
                    lose = not up and self._victim is pair[0]
                    if lose:
                        self._victim = None
                        self.lost_replies += 1
                if lose:
                    break
                dst.sendall(data)
        except OSError:
            pass
        self._cut(pair)
