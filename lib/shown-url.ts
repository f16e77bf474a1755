/**
 * A URL, or what was meant as one, as messages and logs may show it. Userinfo is what comes before an `@`
 * (RFC 3986 3.2.1), and a query's options may hold a password (`?password=`), so both are hidden whatever the
 * slashes around them look like (`redis:/:PW@h`, `https:\\u:PW@h`, `redis:PW@h`): everything between the scheme
 * and the last `@`, and everything from the first `?` on, is shown as `***`. Only a scheme of ours (a Redis URL's,
 * `http`, `https`) is kept, with the `//` after it: any other text before a `:` may be a user name.
 */
const SCHEME = /^(?:rediss?(?:-sentinel|-cluster)?|https?):(?:\/\/)?/i

/** `text` with whatever could be userinfo or a query hidden as `***`: `redis://***@host:6379/0`. */
export function hideUserinfo(text: string): string {
  const kept = SCHEME.exec(text)?.[0] ?? ''
  const at = text.lastIndexOf('@')
  const query = text.indexOf('?', kept.length)
  // A `?` before the last `@` may be a password's own: from the scheme on, nothing is shown.
  if (at !== -1 && query !== -1 && query < at) return `${kept}***`
  const middle = text.slice(kept.length, query === -1 ? text.length : query)
  const host = at === -1 ? middle : `***${middle.slice(middle.lastIndexOf('@'))}`
  return `${kept}${host}${query === -1 ? '' : '?***'}`
}

/** The text quoted as a JSON string, for a one-line message, with `hideUserinfo` applied. */
export function shownUrl(text: string): string {
  return JSON.stringify(hideUserinfo(text))
}
