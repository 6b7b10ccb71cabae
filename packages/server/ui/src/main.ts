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

let current: AbortController | undefined

const login = (root: HTMLElement) => {
  const input = h("input", { id: "token", attrs: { type: "password", autocomplete: "off", "aria-label": "token", placeholder: "the server's token" } })
  const problem = h("p", { class: "problem" })
  const form = h("form", { class: "login" },
    h("h1", {}, "rx"),
    h("p", {}, "The server's bearer token: RX_TOKEN, or the file rx serve named when it started (rx-server.token beside its log). It is kept in this tab only."),
    input,
    h("button", { class: "primary", attrs: { type: "submit" } }, "Open"),
    problem)
  form.addEventListener("submit", (event) => {
    event.preventDefault()
    const candidate = input.value.trim()
    Api.check(candidate).then((ok) => {
      if (!ok) return fill(problem, "That is not this server's token.")
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
    return login(app)
  }
  logout?.removeAttribute("hidden")
  const hash = location.hash.replace(/^#/, "")
  const goal = /^\/goals\/([^/?]+)$/.exec(hash)
  if (goal !== null) return GoalPage.show(app, decodeURIComponent(goal[1] ?? ""), current.signal)
  const status = /[?&]status=(open|waiting|terminated)/.exec(hash)?.[1] ?? ""
  ListPage.show(app, status, current.signal)
}

Api.whenUnauthorized(() => route())
logout?.addEventListener("click", () => {
  Api.forget()
  route()
})
window.addEventListener("hashchange", () => {
  // In-page anchors (#seq-12) scroll; routes start with "/".
  if (location.hash.startsWith("#/") || location.hash === "") route()
})
route()
