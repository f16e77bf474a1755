import t from 'tap'
import { HiddenLine } from '../../lib/cli/hidden-line.js'

/** The line and the state after feeding each piece in turn. */
function typed(...pieces: string[]): { text: string; state: string } {
  const line = new HiddenLine()
  let state = 'more'
  for (const piece of pieces) state = line.feed(piece)
  return { text: line.text, state }
}

t.test('Enter, a line feed or Ctrl-D end the line; Ctrl-C cancels it', async (t) => {
  t.same(typed('secret', '\r'), { text: 'secret', state: 'done' })
  t.same(typed('secret\n'), { text: 'secret', state: 'done' })
  t.same(typed('secret\u0004'), { text: 'secret', state: 'done' })
  t.same(typed('\u0004'), { text: '', state: 'done' }, 'Ctrl-D on an empty line: an empty password')
  t.same(typed('sec', 'ret'), { text: 'secret', state: 'more' }, 'a line not ended yet')
  t.same(typed('secret\u0003'), { text: 'secret', state: 'cancelled' })
  t.same(typed('ab\rcd'), { text: 'ab', state: 'done' }, 'nothing after the end is taken')
})

t.test('Backspace (DEL or BS) takes back one character, a whole code point; Ctrl-U the whole line', async (t) => {
  t.same(typed('secrex\u007ft\r'), { text: 'secret', state: 'done' })
  t.same(typed('secrex\bt\r'), { text: 'secret', state: 'done' })
  t.same(typed('\u007f\u007fok\r'), { text: 'ok', state: 'done' }, 'on an empty line it does nothing')
  t.same(typed('pä🔑', '\u007f', '\u007f', 'ss\r'), { text: 'pss', state: 'done' })
  t.same(typed('wrong\u0015right\r'), { text: 'right', state: 'done' })
})

t.test('other control keys and escape sequences are not taken into the password', async (t) => {
  t.same(typed('a\tb\u0000c\r'), { text: 'abc', state: 'done' }, 'Tab and NUL')
  t.same(typed('ab\u001b[D\u001b[Cc\r'), { text: 'abc', state: 'done' }, 'arrow keys (CSI)')
  t.same(typed('a\u001b[3~b\r'), { text: 'ab', state: 'done' }, 'Delete (CSI with a parameter)')
  t.same(typed('a\u001bOPb\r'), { text: 'ab', state: 'done' }, 'F1 (SS3)')
  t.same(typed('a\u001bxb\r'), { text: 'ab', state: 'done' }, 'Alt-x (ESC and one character)')
  t.same(typed('a\u001b', '[', '1;5', 'D', 'b\r'), { text: 'ab', state: 'done' }, 'a sequence split across reads')
  t.same(typed('ünïcödé ✓\r'), { text: 'ünïcödé ✓', state: 'done' }, 'printable characters of any script')
})
