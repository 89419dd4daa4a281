// An empty program: linked against one popkit library, its link command lists exactly
// what that library drags in (tests/layering/CMakeLists.txt).
int main() {
  return 0;
}
