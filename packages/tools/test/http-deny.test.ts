/**
 * `httpDeny`: endpoints `http_fetch` never reaches whatever `httpAllow` says (rx serve lists its
 * own), by every name and address form that leads there, redirects included.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import { Config, HttpFetch } from "../src/index.js"
import * as Ip from "../src/internal/ip.js"
import { failed, invoke, makeDirs, ok, withTools } from "./helpers.js"

/** A server on 127.0.0.1 answering `hello`, or redirecting `/to?url=` there; its port. Closed with the scope. */
const server = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<http.Server>((resolve) => {
      const s = http.createServer((req, res) => {
        const url = new URL(req.url ?? "/", "http://x")
        if (url.pathname === "/to") {
          res.writeHead(302, { location: url.searchParams.get("url") ?? "/" })
          return res.end()
        }
        res.end("hello")
      })
      s.listen(0, "127.0.0.1", () => resolve(s))
    })
  ),
  (s) => Effect.sync(() => s.closeAllConnections()).pipe(Effect.zipRight(Effect.promise(() => new Promise((r) => s.close(r)))))
).pipe(Effect.map((s) => (s.address() as AddressInfo).port))

/** Every loopback and unspecified form allowed, as `--http-allow` could. */
const allowAll = ["127.0.0.0/8", "0.0.0.0/8", "::1", "::/128", "::ffff:0:0/96", "localhost"]

const setup = (httpDeny: ReadonlyArray<string>, httpAllow: ReadonlyArray<string> = allowAll) => {
  const dirs = makeDirs()
  return { ...dirs, config: { workspace: dirs.ws, sandbox: "none" as const, httpAllow, httpDeny } }
}

describe("http_fetch with httpDeny", () => {
  it.scopedLive("refuses the endpoint by every address and name that reaches it, though the allow-list permits them", () =>
    Effect.gen(function*() {
      const port = yield* server
      const other = yield* server
      const { cleanup, config } = setup([`127.0.0.1:${port}`])
      // The allow-list lets other local servers through: the refusal is the deny list's.
      expect(ok(yield* withTools(config, invoke("http_fetch", { url: `http://127.0.0.1:${other}/` })))["body"]).toBe("hello")
      const forms = [
        `http://127.0.0.1:${port}/v1/goals`,
        `http://localhost:${port}/`,
        `http://0.0.0.0:${port}/`,
        `http://0:${port}/`,
        `http://2130706433:${port}/`,
        `http://[::ffff:127.0.0.1]:${port}/`,
        `http://127.1:${port}/`,
        `http://[::1]:${port}/`,
        `http://LocalHost:${port}/`
      ]
      for (const url of forms) {
        const failure = failed(yield* withTools(config, invoke("http_fetch", { url, method: "POST", body: "{}" })))
        expect(failure.details, url).toMatchObject({ _tag: "@rx/tools/EndpointRefused", port })
        expect(failure.message, url).toContain("whatever the allow-list says")
      }
      // A redirect from an allowed server to it is refused too.
      const redirected = failed(yield* withTools(config, invoke("http_fetch", { url: `http://127.0.0.1:${other}/to?url=${encodeURIComponent(`http://localhost:${port}/`)}` })))
      expect(redirected.details).toMatchObject({ _tag: "@rx/tools/EndpointRefused", host: "localhost", port })
      cleanup()
    }))

  it.scopedLive("an endpoint on an unspecified address (a server on every address) covers this machine's interface addresses", () =>
    Effect.gen(function*() {
      const port = yield* server
      const own = Object.values(os.networkInterfaces()).flatMap((list) => list ?? []).map((info) => info.address)
      const { cleanup, config } = setup([`0.0.0.0:${port}`], ["0.0.0.0/0", "::/0"])
      for (const address of ["127.0.0.1", "127.0.0.2", ...own]) {
        const url = `http://${address.includes(":") ? `[${address.replace(/%.*$/, "")}]` : address}:${port}/`
        const failure = failed(yield* withTools(config, invoke("http_fetch", { url })))
        expect(failure.details, url).toMatchObject({ _tag: "@rx/tools/EndpointRefused" })
      }
      cleanup()
    }))

  it("denial: by name, by address, by this machine for a local entry; never on another port", () => {
    const deny = (entries: ReadonlyArray<string>) => entries.flatMap((e) => Ip.parseEndpoint(e) ?? [])
    const eth = Ip.parse("192.0.2.10")
    const interfaces = eth === undefined ? [] : [eth]
    expect(HttpFetch.denial(deny(["rx.internal:7433"]), "RX.internal", ["10.1.2.3"], 7433, interfaces)).toMatchObject({ host: "rx.internal" })
    expect(HttpFetch.denial(deny(["10.1.2.3:7433"]), "api.example", ["10.1.2.3"], 7433, interfaces)).toBeDefined()
    expect(HttpFetch.denial(deny(["10.1.2.3:7433"]), "127.0.0.1", [], 7433, interfaces)).toBeUndefined()
    expect(HttpFetch.denial(deny(["[::]:7433"]), "192.0.2.10", [], 7433, interfaces)).toBeDefined()
    expect(HttpFetch.denial(deny(["localhost:7433"]), "evil.example", ["::ffff:127.0.0.9"], 7433, interfaces)).toBeDefined()
    expect(HttpFetch.denial(deny(["127.0.0.1:7433"]), "127.0.0.1", [], 7434, interfaces)).toBeUndefined()
    expect(HttpFetch.denial(deny(["127.0.0.1:7433"]), "198.51.100.7", [], 7433, interfaces)).toBeUndefined()
    expect(HttpFetch.endpoint("::1", 80)).toBe("[::1]:80")
    expect(HttpFetch.endpoint("127.0.0.1", 80)).toBe("127.0.0.1:80")
  })

  it.effect("a malformed entry is a config error naming it", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Config.decode({ workspace: "/tmp", httpDeny: ["no-port"] }))
      expect(error.message).toContain("\"no-port\" is not an endpoint")
    }))
})
