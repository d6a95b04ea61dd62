// The sign-in page, shown when /console/session answers 401.
import * as api from '../api.js';
import { h, mount } from '../ui.js';

export function loginView(ctx, el, signedIn) {
  const token = h('input#token', { type: 'password', name: 'token', autocomplete: 'current-password', required: true, spellcheck: false, placeholder: 'a token from the front door’s tokens file' });
  const error = h('p.form-error#login-error', { hidden: true });
  const button = h('button.btn.primary#login-submit', { type: 'submit' }, 'Sign in');
  const form = h('form.login-card', {
    on: {
      submit: async (ev) => {
        ev.preventDefault();
        button.disabled = true;
        error.hidden = true;
        try {
          await api.login(token.value.trim());
          token.value = '';
          await signedIn();
        } catch (err) {
          error.hidden = false;
          error.textContent = err.status === 401 || err.status === 403 ? 'That token is not one this front door accepts.' : `Sign in failed: ${err.message}`;
          button.disabled = false;
          token.select();
        }
      },
    },
  },
  h('div.login-brand', h('span.logo'), 'Pollux'),
  h('h1', 'Sign in to the console'),
  h('p.muted', 'Paste an API token. A read-only token shows everything and changes nothing; the session lasts 12 hours.'),
  h('label.field', h('span', 'Token'), token),
  error,
  button);
  mount(el, h('div.login', form));
  token.focus();
}
