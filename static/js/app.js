// Ctrl/Cmd+Enter submits the form a textarea belongs to (keyboard-first review).
document.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && event.target.matches("textarea")) {
    event.preventDefault();
    event.target.form?.requestSubmit();
  }
});
