// A modal confirmation (the page's <dialog>): resolves true when the user chose the action.
// Focus starts on the safe choice; Escape closes it as "no".
export function confirmAction(text, yesLabel) {
  const dialog = document.getElementById('confirm');
  document.getElementById('confirm-text').textContent = text;
  document.getElementById('confirm-yes').textContent = yesLabel;
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), {once: true});
    dialog.returnValue = '';
    dialog.showModal();
    document.getElementById('confirm-no').focus();
  });
}
