#include <cstdio>
int main() { std::puts("magicpig: not built yet"); return 1; }
