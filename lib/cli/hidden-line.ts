/**
 * A line typed on a terminal in raw mode, with echo off (`hash-password`,
 * docs/cli.md): what each key does to it. Raw mode hands every key over as it
 * is typed, the terminal's own line editing included, so the few keys a
 * password prompt needs are done here; any other control key, and the escape
 * sequences of arrow and function keys (ECMA-48 CSI and SS3), are ignored
 * rather than taken into the password.
 */
export class HiddenLine {
  #chars: string[] = []
  /** Inside an escape sequence: after ESC, after ESC [ (or ESC O), or not. */
  #escape: 'none' | 'esc' | 'csi' = 'none'

  /** The line so far. */
  get text(): string {
    return this.#chars.join('')
  }

  /** Feeds typed text: `done` once Enter or Ctrl-D ends the line, `cancelled` on Ctrl-C, else `more`. */
  feed(typed: string): 'more' | 'done' | 'cancelled' {
    for (const char of typed) {
      const code = char.codePointAt(0) as number
      if (this.#escape === 'esc') {
        this.#escape = char === '[' || char === 'O' ? 'csi' : 'none'
        continue
      }
      if (this.#escape === 'csi') {
        // A CSI sequence ends with its final byte, 0x40 to 0x7e (ECMA-48 5.4).
        if (code >= 0x40 && code <= 0x7e) this.#escape = 'none'
        continue
      }
      if (char === '\r' || char === '\n' || char === '\u0004') return 'done'
      if (char === '\u0003') return 'cancelled'
      if (char === '\u007f' || char === '\b') this.#chars.pop()
      else if (char === '\u0015') this.#chars = []
      else if (char === '\u001b') this.#escape = 'esc'
      else if (code >= 0x20) this.#chars.push(char)
    }
    return 'more'
  }
}
