/**
 * The rx inspector: a page served by `rx serve` on its own origin. Routes live in the URL's
 * fragment (`#/`, `#/goals/<id>`), which never reaches a server or a Referer; the token is asked
 * for once per tab and kept in sessionStorage, sent only in the Authorization header.
 */
import * as Api from "./api.js"
import { fill, h } from "./dom.js"
import * as GoalPage from "./goal.js"
import * as ListPage from "./list.js"

const app = document.getElementById("app")
const logout = document.getElementById("logout")
const banner = document.getElementById("connection")

let current: AbortController | undefined
/** Why the login form shows: the server refused the token this tab kept. */
let refused = false

/** How often the page asks the server whether it is there. */
const pingMs = 2_000

/**
 * The connection at the top of the page: a server that stopped answering is said at once (what
 * the page shows may be out of date), and the page goes on by itself when it answers again.
 */
const showConnection = (now: Api.Connection) => {
  if (banner === null) return
  if (now.state === "up") {
    banner.className = "connection up"
    fill(banner, "Connected again: the page is up to date.")
    setTimeout(() => {
      if (Api.connectionNow().state === "up") banner.setAttribute("hidden", "")
    }, 3_000)
    return
  }
  banner.removeAttribute("hidden")
  banner.className = "connection down"
  fill(banner,
    h("b", {}, "The server does not answer"),
    ` (${now.why}, since ${new Date(now.since).toLocaleTimeString()}): what this page shows may be out of date. It reconnects by itself when the server is back.`)
}

const login = (root: HTMLElement) => {
  const input = h("input", { id: "token", attrs: { type: "password", autocomplete: "off", "aria-label": "token", placeholder: "the server's token" } })
  const problem = h("p", { class: "problem" })
  const form = h("form", { class: "login" },
    h("h1", {}, "rx"),
    h("p", {}, "The server's bearer token: RX_TOKEN, or the file rx serve named when it started (rx-server.token beside its log). It is kept in this tab, not on disk: a new tab of this page gets it from a tab that has it; with none open, it asks again."),
    input,
    h("button", { class: "primary", attrs: { type: "submit" } }, "Open"),
    problem)
  if (refused) {
    fill(problem, "The server refused the token this tab had: it was restarted with another one (rx serve --new-token, or another RX_TOKEN). Enter the current token.")
    problem.id = "refused"
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault()
    const candidate = input.value.trim()
    Api.check(candidate).then((ok) => {
      if (!ok) return fill(problem, "That is not this server's token.")
      refused = false
      Api.remember(candidate)
      route()
    }, (error: unknown) => fill(problem, error instanceof Error ? error.message : String(error)))
  })
  fill(root, form)
  input.focus()
}

const route = () => {
  current?.abort()
  current = new AbortController()
  if (app === null) return
  if (Api.token() === null) {
    logout?.setAttribute("hidden", "")
    if (askTabs) {
      // Once, as the tab opens: an open tab of this page may hand its token over.
      askTabs = false
      const signal = current.signal
      void Api.fromOpenTab(askTabsMs)
        .then((handed) =>
          handed === null
            ? false
            : Api.check(handed).then((ok) => {
              if (ok) Api.remember(handed)
              return ok
            })
        )
        .catch(() => false)
        .then(() => {
          if (!signal.aborted) route()
        })
      return
    }
    return login(app)
  }
  logout?.removeAttribute("hidden")
  const hash = location.hash.replace(/^#/, "")
  const goal = /^\/goals\/([^/?]+)$/.exec(hash)
  if (goal !== null) return GoalPage.show(app, decodeURIComponent(goal[1] ?? ""), current.signal)
  const status = /[?&]status=(open|waiting|terminated)/.exec(hash)?.[1] ?? ""
  ListPage.show(app, status, current.signal)
}

/** Whether this tab is yet to ask the open tabs for the token, and how long it waits for one to answer. */
let askTabs = true
const askTabsMs = 1_000
Api.shareWithNewTabs()

Api.whenUnauthorized(() => {
  refused = true
  route()
})
Api.watchConnection(showConnection)
const ping = () => {
  void Api.ping().finally(() => setTimeout(ping, pingMs))
}
ping()
logout?.addEventListener("click", () => {
  refused = false
  Api.forget()
  route()
})
window.addEventListener("hashchange", () => {
  // In-page anchors (#seq-12) scroll; routes start with "/".
  if (location.hash.startsWith("#/") || location.hash === "") route()
})
route()
